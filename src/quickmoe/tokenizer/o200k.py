"""gpt-oss's own tokenizer, o200k_harmony, built in (no model files needed).

Encoding runs in openai-harmony's Rust BPE (the tiktoken algorithm), loaded from the local
o200k_base file: it loads in ~0.15 s, and harmony is needed for the chat format anyway. tiktoken
encodes about 3x faster but loads slower (its ranks must be parsed in Python) and is not a runtime
dependency; the tests use it as the independent reference. Decoding uses a Python table id -> bytes,
built on the first decode (~0.1 s).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from quickmoe.errors import TokenizerError
from quickmoe.tokenizer.base import Tokenizer
from quickmoe.tokenizer.chat import harmony_encoding
from quickmoe.tokenizer.vocab import (GPT_OSS_EOS_TOKEN_IDS, VOCAB_SIZE, id_to_bytes_table, o200k_base_file,
                                      read_tiktoken_file, special_token_names)


class O200kHarmonyTokenizer(Tokenizer):
    """o200k_base BPE plus the gpt-oss special tokens (ids 199998..201087): the gpt-oss tokenizer."""

    name = "o200k_harmony"
    vocab_size = VOCAB_SIZE
    eos_token_ids = GPT_OSS_EOS_TOKEN_IDS
    uses_harmony = True

    def __init__(self) -> None:
        self._encoding = harmony_encoding()
        self._id_to_bytes: list[bytes] | None = None

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TokenizerError(f"{self.name}: can only encode str, got {type(text).__name__}")
        return self._encoding.encode(text, disallowed_special=())

    @cached_property
    def special_token_ids(self) -> frozenset[int]:
        """The gpt-oss special tokens, ids 199998..201087 (reserved ones included)."""
        return frozenset(special_token_names())

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        table = self._decode_table()
        return b"".join([table[t] for t in self.checked_ids(ids)])

    def _decode_table(self) -> list[bytes]:
        if self._id_to_bytes is None:
            table = id_to_bytes_table(read_tiktoken_file(o200k_base_file()), special_token_names())
            if len(table) != self.vocab_size:
                raise TokenizerError(f"{o200k_base_file()}: gives {len(table)} ids, expected {self.vocab_size}")
            self._id_to_bytes = table
        return self._id_to_bytes
