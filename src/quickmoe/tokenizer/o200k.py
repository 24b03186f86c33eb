"""gpt-oss's own tokenizer, o200k_harmony, built in (no model files needed), also standing for a model
directory's tokenizer.json once that file is recognised as o200k_harmony (tokenizer/recognise.py).

Encoding runs in openai-harmony's Rust BPE (the tiktoken algorithm), loaded from the local
o200k_base file on the first encode: it loads in ~0.2 s, and harmony is needed for the chat format anyway. tiktoken
encodes about 3x faster but loads slower (its ranks must be parsed in Python) and is not a runtime
dependency; the tests use it as the independent reference. Decoding uses a Python table id -> bytes,
each base token's bytes decoded on first use.
"""

from __future__ import annotations

import binascii
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

from quickmoe.errors import TokenizerError
from quickmoe.tokenizer.base import Tokenizer
from quickmoe.tokenizer.byte_level import text_to_bytes
from quickmoe.tokenizer.chat import harmony_encoding
from quickmoe.tokenizer.model_files import TOKENIZER_FILE, read_eos_token_ids
from quickmoe.tokenizer.vocab import (GPT_OSS_EOS_TOKEN_IDS, O200K_BASE_NUM_RANKS, VOCAB_SIZE, o200k_base_file,
                                      read_tiktoken_file, special_token_names)


class O200kHarmonyTokenizer(Tokenizer):
    """o200k_base BPE plus the gpt-oss special tokens (ids 199998..201087): the gpt-oss tokenizer."""

    name = "o200k_harmony"
    vocab_size = VOCAB_SIZE
    eos_token_ids = GPT_OSS_EOS_TOKEN_IDS
    uses_harmony = True

    def __init__(self, model_dir: Path | str | None = None) -> None:
        """`model_dir`: a model directory whose tokenizer.json is o200k_harmony (recognised): errors then name
        that file, and the eos ids come from the directory's files as they would through `tokenizers`
        (generation_config.json, tokenizer_config.json, special_tokens_map.json, then harmony's)."""
        self._id_to_bytes: list[bytes | None] | None = None
        self._vocabulary_lines: list[bytes] = []
        if model_dir is not None:
            self.name = str(Path(model_dir) / TOKENIZER_FILE)
            self.eos_token_ids = read_eos_token_ids(Path(model_dir), self.vocab_size, self._token_to_id,
                                                    self.uses_harmony, self.name)

    @property
    def _encoding(self):  # -> openai_harmony.HarmonyEncoding
        """harmony's BPE, loaded on the first encode (~0.2 s holding the GIL; once per process): a serving engine
        process, whose frontend tokenizes, decodes and never loads it."""
        return harmony_encoding()

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TokenizerError(f"{self.name}: can only encode str, got {type(text).__name__}")
        return self._encoding.encode(text, disallowed_special=())

    @cached_property
    def special_token_ids(self) -> frozenset[int]:
        """The gpt-oss special tokens, ids 199998..201087 (reserved ones included)."""
        return frozenset(special_token_names())

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        table = self._decode_table()  # [vocab_size]: each id's bytes once looked up, else None
        pieces = []
        for token in self.checked_ids(ids):
            piece = table[token]
            if piece is None:  # a base token: its rank's line of the vocabulary file, 'base64-token rank'
                line = self._vocabulary_lines[token]
                piece = table[token] = binascii.a2b_base64(line[:line.index(b" ")])
            pieces.append(piece)
        return b"".join(pieces)

    def _token_to_id(self, token: str) -> int | None:
        """The id of a token as tokenizer.json writes it (a special token's text, else byte-level characters)."""
        for token_id, name in special_token_names().items():
            if name == token:
                return token_id
        data = text_to_bytes(token)
        base_tokens = read_tiktoken_file(o200k_base_file())  # a rare lookup (an eos that is not special)
        return base_tokens.index(data) if data in base_tokens else None

    def _decode_table(self) -> list[bytes | None]:
        """The table id -> bytes, specials filled, base tokens looked up on first use: the first decode then costs
        splitting the vocabulary file into lines (~0.01 s), not decoding all of it (~0.08 s). The file's sha256 was
        checked (o200k_base_file), so its lines are 'base64-token rank' with the ranks in order."""
        if self._id_to_bytes is None:
            path = o200k_base_file()
            lines = path.read_bytes().split(b"\n")
            if lines and not lines[-1]:
                lines.pop()  # after the last newline
            if len(lines) != O200K_BASE_NUM_RANKS:
                raise TokenizerError(f"{path}: holds {len(lines)} tokens, expected {O200K_BASE_NUM_RANKS}")
            self._vocabulary_lines = lines
            table: list[bytes | None] = [None] * O200K_BASE_NUM_RANKS
            for token_id, name in sorted(special_token_names().items()):
                if token_id != len(table):
                    raise TokenizerError(f"special token id {token_id} leaves a gap after {len(table)} ids")
                table.append(name.encode("utf-8"))
            if len(table) != self.vocab_size:
                raise TokenizerError(f"{path}: gives {len(table)} ids, expected {self.vocab_size}")
            self._id_to_bytes = table
        return self._id_to_bytes
