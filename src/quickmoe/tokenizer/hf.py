"""A tokenizer backed by a model directory's Hugging Face tokenizer.json (the `tokenizers` library).

eos ids come from generation_config.json (`eos_token_id`), tokenizer_config.json and
special_tokens_map.json (`eos_token`), whichever exist. When the vocabulary is o200k_harmony (the
harmony special tokens at their gpt-oss ids, and o200k's ids for plain text) chats are rendered and
parsed by openai-harmony, exactly as for the built-in tokenizer; otherwise by the directory's chat template
(tokenizer/chat_template.py), as transformers' apply_chat_template renders them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from quickmoe.errors import RequestError, TokenizerError
from quickmoe.tokenizer.base import Tokenizer
from quickmoe.tokenizer.byte_level import text_to_bytes
from quickmoe.tokenizer.chat_template import ChatTemplate, load_chat_template
from quickmoe.tokenizer.model_files import TOKENIZER_FILE, read_eos_token_ids, read_json_object, read_tokenizer_file
from quickmoe.tokenizer.text import replace_lone_surrogates
from quickmoe.tokenizer.vocab import (
    CALL,
    CHANNEL,
    CONSTRAIN,
    END,
    MESSAGE,
    RETURN,
    START,
    special_token_names,
)

logger = logging.getLogger(__name__)

_HARMONY_PROBE_TEXT, _HARMONY_PROBE_IDS = "Hello world", [13225, 2375]
# the tokens harmony's format is made of, at their o200k_harmony ids
HARMONY_FORMAT_TOKEN_IDS = (RETURN, CONSTRAIN, CHANNEL, START, END, MESSAGE, CALL)
_BYTE_FALLBACK_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


class HFTokenizer(Tokenizer):
    """The tokenizer described by `model_dir/tokenizer.json` (Hugging Face `tokenizers` format)."""

    def __init__(self, model_dir: Path, data: bytes | None = None) -> None:
        """`data`: the bytes of model_dir/tokenizer.json when the caller has read them already."""
        import tokenizers

        self.model_dir = Path(model_dir)
        self.path = self.model_dir / TOKENIZER_FILE
        self.name = str(self.path)
        data = read_tokenizer_file(self.path) if data is None else data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TokenizerError(f"{self.path}: cannot read it ({exc})") from None
        try:
            self._tokenizer = tokenizers.Tokenizer.from_str(text)
        except Exception as exc:  # tokenizers raises a plain Exception for every kind of bad file
            raise TokenizerError(f"{self.path}: not a valid Hugging Face tokenizer.json ({exc}); expected the "
                                 "JSON written by the `tokenizers` library") from exc
        self._tokenizer.encode_special_tokens = True  # "<|end|>" in user text stays plain text
        self.vocab_size = self._tokenizer.get_vocab_size(with_added_tokens=True)
        self.uses_harmony = self._has_harmony_vocabulary()
        self.eos_token_ids = self._read_eos_token_ids()
        self._id_to_bytes: list[bytes | None] = [None] * self.vocab_size  # filled by decode_bytes
        logger.debug("%s: %d ids, eos %s, harmony chat: %s", self.path, self.vocab_size, self.eos_token_ids,
                     self.uses_harmony)

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TokenizerError(f"{self.name}: can only encode str, got {type(text).__name__}")
        try:
            return self._tokenizer.encode(text, add_special_tokens=False).ids
        except TypeError:  # lone surrogates: not UTF-8
            return self._tokenizer.encode(replace_lone_surrogates(text), add_special_tokens=False).ids

    def render_chat(self, messages: Sequence[Any], reasoning_effort: str | None = None,
                    tools: Sequence[Any] | None = None) -> list[int]:
        """The conversation's prompt ids: harmony for an o200k_harmony vocabulary, else the chat template
        (rendered with add_generation_prompt; the special tokens it writes are tokens, nothing is added)."""
        if self.uses_harmony:
            return super().render_chat(messages, reasoning_effort, tools)
        if tools:
            raise RequestError(f"{self.name}: tools need a harmony model (gpt-oss); this model's chat template is "
                               "rendered without them")
        if self.chat_template is None:
            raise TokenizerError(f"{self.name}: cannot render a chat: the vocabulary is not harmony's and the "
                                 "directory has no chat template (expected chat_template in tokenizer_config.json, or "
                                 "chat_template.jinja)")
        text = self.chat_template.render(messages, add_generation_prompt=True, reasoning_effort=reasoning_effort)
        return self._template_tokenizer.encode(text, add_special_tokens=False).ids

    @cached_property
    def chat_template(self) -> ChatTemplate | None:
        """The directory's chat template, or None."""
        return load_chat_template(self.model_dir, read_json_object(self.model_dir / "tokenizer_config.json"),
                                  read_json_object(self.model_dir / "special_tokens_map.json"))

    @cached_property
    def _template_tokenizer(self):  # -> tokenizers.Tokenizer
        """A second instance that tokenizes the special tokens in rendered templates (`encode` keeps them text)."""
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(str(self.path))
        tok.encode_special_tokens = False
        return tok

    @cached_property
    def special_token_ids(self) -> frozenset[int]:
        """Ids of the added tokens that tokenizer.json marks special."""
        return frozenset(token_id for token_id, token in self._tokenizer.get_added_tokens_decoder().items()
                         if token.special)

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        table = self._id_to_bytes  # [vocab_size]: each id's bytes once looked up, else None
        pieces = []
        for token in self.checked_ids(ids):
            piece = table[token]
            if piece is None:
                piece = table[token] = self._token_bytes(token)
            pieces.append(piece)
        return b"".join(pieces)

    # -- construction helpers ---------------------------------------------------------------------
    def _has_harmony_vocabulary(self) -> bool:
        names = special_token_names()
        if any(self._tokenizer.token_to_id(names[token_id]) != token_id for token_id in HARMONY_FORMAT_TOKEN_IDS):
            return False
        return self.encode(_HARMONY_PROBE_TEXT) == _HARMONY_PROBE_IDS

    def _read_eos_token_ids(self) -> tuple[int, ...]:
        return read_eos_token_ids(self.model_dir, self.vocab_size, self._tokenizer.token_to_id, self.uses_harmony,
                                  str(self.path))

    def _token_bytes(self, token_id: int) -> bytes:
        """The bytes of one id, from its token string: an added token's content as UTF-8, a byte-level token through
        the byte alphabet, a byte-fallback token `<0xNN>` as that byte, else SentencePiece-style text (U+2581 marks
        a space). Looked up per id on first use, not for the whole vocabulary at the first decode: that table, for
        gpt-oss's 201,088 ids (`get_vocab` and a Python loop over it), took 0.26 s on the development machine and
        most of the first request's 0.63 s on the H100's host (docs/benchmarks.md, Cold start II)."""
        token = self._tokenizer.id_to_token(token_id)
        if token is None:
            raise TokenizerError(f"{self.name}: token id {token_id} has no token (the ids are not contiguous)")
        if token_id in self._added_token_ids:
            return token.encode("utf-8")
        if self._byte_level:
            return text_to_bytes(token) or token.encode("utf-8")
        if self._byte_fallback and _BYTE_FALLBACK_TOKEN.fullmatch(token):
            return bytes([int(token[3:5], 16)])
        return token.replace("\u2581", " ").encode("utf-8")

    @cached_property
    def _added_token_ids(self) -> frozenset[int]:
        return frozenset(self._tokenizer.get_added_tokens_decoder())

    @cached_property
    def _byte_level(self) -> bool:
        decoder = self._tokenizer.decoder
        return decoder is not None and b'"ByteLevel"' in decoder.__getstate__()

    @cached_property
    def _byte_fallback(self) -> bool:
        return bool(getattr(self._tokenizer.model, "byte_fallback", False))
