"""The tokenizer interface the engine uses, and what every implementation shares."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from quickmoe.errors import TokenizerError
from quickmoe.tokenizer import chat
from quickmoe.tokenizer.chat import ChatSegment


class Tokenizer(ABC):
    """Text <-> token ids, plus the model's chat format (harmony, for gpt-oss vocabularies).

    Subclasses set `name` (what error messages call it), `vocab_size` (number of ids, special tokens
    included), `eos_token_ids` (ids that end a plain-text generation) and `uses_harmony` (whether the
    vocabulary is o200k_harmony, so that openai-harmony renders and parses its chats).

    A model may have more output rows than its tokenizer has ids (Qwen3-30B-A3B: 151,936 logits for 151,669
    ids, rounded up for the GPU). Once `accept_model_ids(config.vocab_size)` says so, ids of those extra rows
    are valid, and stand for no text, as transformers' decode leaves them out: a model can generate them.
    """

    name: str
    vocab_size: int
    eos_token_ids: tuple[int, ...]
    uses_harmony: bool
    model_vocab_size: int = 0  # the model's ids: max(this, vocab_size) bounds valid ids

    def accept_model_ids(self, model_vocab_size: int) -> None:
        """Ids up to the model's vocabulary (config.json's vocab_size) are valid from now on; those past this
        tokenizer's decode to no text."""
        self.model_vocab_size = model_vocab_size

    @property
    def id_limit(self) -> int:
        """Valid ids are [0, id_limit): the tokenizer's, and the model's extra rows once accepted."""
        return max(self.vocab_size, self.model_vocab_size)

    @abstractmethod
    def encode(self, text: str) -> list[int]:
        """Plain text to ids. Special-token strings in the text ("<|end|>") are ordinary text."""

    @abstractmethod
    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        """Ids to the bytes they stand for; may stop inside a UTF-8 character (incremental decoding)."""

    @property
    @abstractmethod
    def special_token_ids(self) -> frozenset[int]:
        """Ids of the special tokens (<|start|>, <|channel|>, ...): what `skip_special_tokens` leaves out."""

    def decode(self, ids: Sequence[int]) -> str:
        """Ids to text; bytes that are not valid UTF-8 become U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def render_chat(self, messages: Sequence[Mapping[str, Any]], reasoning_effort: str | None = None,
                    tools: Sequence[Mapping[str, Any]] | None = None) -> list[int]:
        """The conversation's prompt ids, ready for the assistant to complete (see tokenizer.chat); `tools`:
        function tools ({"name", "description", "parameters"})."""
        self._require_harmony("render a chat")
        return chat.render_chat(messages, reasoning_effort, tools)

    def tool_call_prefix(self, name: str) -> list[int]:
        """Tokens that force the reply to call function `name` ("": any function; see tokenizer.chat)."""
        self._require_harmony("force a tool call")
        return chat.tool_call_prefix(name)

    @property
    def chat_stop_token_ids(self) -> tuple[int, ...]:
        """Tokens that end an assistant turn in a chat (harmony: <|return|>, <|call|>)."""
        return chat.CHAT_STOP_TOKEN_IDS if self.uses_harmony else self.eos_token_ids

    def parse_chat_completion(self, ids: Sequence[int]) -> list[ChatSegment]:
        """A chat completion's ids split into (channel, text) segments: analysis, final, ..."""
        checked = self.checked_ids(ids)
        if not self.uses_harmony:
            return [ChatSegment(channel="final", text=self.decode(checked))]
        return chat.parse_chat_completion(checked)

    def checked_ids(self, ids: Sequence[int]) -> list[int]:
        """`ids` as a list of ints, each checked to lie in [0, id_limit), without the model's extra ids (past
        vocab_size: no text)."""
        try:
            checked = [int(t) for t in ids]
        except (TypeError, ValueError) as exc:
            raise TokenizerError(f"{self.name}: token ids must be integers ({exc})") from exc
        limit = self.id_limit
        for token in checked:
            if not 0 <= token < limit:
                extra = f" (the model's {limit - self.vocab_size} ids past the tokenizer's included)" \
                    if limit > self.vocab_size else ""
                raise TokenizerError(f"{self.name}: token id {token} is outside the vocabulary [0, {limit}){extra}")
        if limit > self.vocab_size:
            checked = [t for t in checked if t < self.vocab_size]
        return checked

    def _require_harmony(self, action: str) -> None:
        if not self.uses_harmony:
            raise TokenizerError(f"{self.name}: cannot {action}: the vocabulary lacks harmony's special tokens "
                                 "(<|start|>=200006, <|message|>=200008, ...) and there is no chat template")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} vocab_size={self.vocab_size}>"
