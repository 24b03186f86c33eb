"""A chat completion's generated ids, as they arrive, turned into what the chat API returns: `reasoning` (harmony's
analysis channel), `content` (every other channel: final, commentary, and text that does not follow the format)
and tool calls (messages addressed to a recipient, `functions.NAME`: their text is the call's arguments), with the
request's stop strings matched on `content` only.

Reasoning never reaches `content`: the split is made on token ids (HarmonyStreamParser), not on decoded text.
A model whose chat is not harmony (a chat template: Qwen3-MoE, Mixtral) answers in plain text: all of it is
`content` (special tokens left out).
"""

from __future__ import annotations

import codecs
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from quickmoe.engine.detokenizer import StopMatcher
from quickmoe.engine.outputs import StepOutput
from quickmoe.server.harmony_stream import ChannelText, HarmonyStreamParser
from quickmoe.tokenizer.base import Tokenizer

__all__ = ["REASONING_CHANNEL", "ChatDelta", "ChatOutputSplitter", "PlainTextParser", "ToolCallDelta",
           "reply_token_ids"]

REASONING_CHANNEL = "analysis"


@dataclass
class ToolCallDelta:
    """A piece of the reply's tool call `index`: its first piece carries the call's id and function name."""

    index: int
    arguments: str
    id: str | None = None
    name: str | None = None


@dataclass
class ChatDelta:
    reasoning: str = ""
    content: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)

    def __iter__(self):  # (reasoning, content), as the splitter returned before it knew tool calls
        return iter((self.reasoning, self.content))

    def __add__(self, other: ChatDelta) -> ChatDelta:
        return ChatDelta(self.reasoning + other.reasoning, self.content + other.content,
                         self.tool_calls + other.tool_calls)


def reply_token_ids(tokenizer: Tokenizer, out: StepOutput) -> list[int]:
    """`out.token_ids` without the token that ended the generation when the chat format does not parse it: a
    model's end-of-text (gpt-oss's <|endoftext|>, a stop token of every request) is not a message end to harmony,
    which would make it content text; <|return|> and <|call|> (the chat's own stop tokens) stay."""
    ids = out.token_ids
    if (out.finished and isinstance(out.stop_reason, int) and ids and ids[-1] == out.stop_reason
            and out.stop_reason not in tokenizer.chat_stop_token_ids):
        return ids[:-1]
    return ids


class ChatOutputSplitter:
    """Feed the generated ids with `add`, call `finish` at the end; each returns a ChatDelta. `stop` is the stop
    string that ended the content (the caller then stops the request). `prefix_ids`: tokens the prompt already
    holds of the reply (a forced tool call's header), parsed first."""

    def __init__(self, tokenizer: Tokenizer, stops: Sequence[str] = (), include_stop: bool = False,
                 prefix_ids: Sequence[int] = ()) -> None:
        self._parser = HarmonyStreamParser(tokenizer) if tokenizer.uses_harmony else PlainTextParser(tokenizer)
        self._content = StopMatcher(stops, include_stop)
        self._tool_message: int | None = None  # the parser's message index of the current tool call
        self.num_tool_calls = 0
        self._pending = self._split(self._parser.feed(prefix_ids)) if prefix_ids else ChatDelta()

    @property
    def stop(self) -> str | None:
        return self._content.stop

    def add(self, token_ids: Sequence[int]) -> ChatDelta:
        delta = self._split(self._parser.feed(token_ids))
        if self._pending is not None:
            delta, self._pending = self._pending + delta, None
        return delta

    def finish(self) -> ChatDelta:
        delta = self.add(())
        delta = delta + self._split(self._parser.finish())
        delta.content += self._content.finish()
        return delta

    def _split(self, pieces: list[ChannelText]) -> ChatDelta:
        delta = ChatDelta()
        for piece in pieces:
            if self._content.stop is not None:
                break
            if piece.recipient is not None and piece.recipient != "assistant":
                if piece.message != self._tool_message:
                    self._tool_message = piece.message
                    self.num_tool_calls += 1
                    delta.tool_calls.append(ToolCallDelta(self.num_tool_calls - 1, piece.text,
                                                          f"call_{uuid.uuid4().hex[:24]}",
                                                          piece.recipient.removeprefix("functions.")))
                else:
                    delta.tool_calls.append(ToolCallDelta(self.num_tool_calls - 1, piece.text))
            elif piece.channel == REASONING_CHANNEL:
                delta.reasoning += piece.text
            else:
                delta.content += self._content.add(piece.text)
        return delta


class PlainTextParser:
    """The reply of a non-harmony chat as one "final" message: its text decoded incrementally (whole UTF-8
    characters only), special tokens left out; the interface of HarmonyStreamParser."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._specials = tokenizer.special_token_ids
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token_ids: Iterable[int]) -> list[ChannelText]:
        ids = [int(t) for t in token_ids if int(t) not in self._specials]
        return self._piece(self._decoder.decode(self._tokenizer.decode_bytes(ids)))

    def finish(self) -> list[ChannelText]:
        return self._piece(self._decoder.decode(b"", final=True))

    @staticmethod
    def _piece(text: str) -> list[ChannelText]:
        return [ChannelText(message=0, channel="final", text=text)] if text else []
