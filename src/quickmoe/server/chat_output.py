"""A chat completion's generated ids, as they arrive, turned into the two texts the chat API returns:
`reasoning_content` (harmony's analysis channel) and `content` (every other channel: final, commentary, and
text that does not follow the format), with the request's stop strings matched on `content` only.

Reasoning never reaches `content`: the split is made on token ids (HarmonyStreamParser), not on decoded text.
A model whose chat is not harmony (a chat template: Qwen3-MoE, Mixtral) answers in plain text: all of it is
`content` (special tokens left out).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Sequence

from quickmoe.engine.detokenizer import StopMatcher
from quickmoe.server.harmony_stream import ChannelText, HarmonyStreamParser
from quickmoe.tokenizer.base import Tokenizer

__all__ = ["REASONING_CHANNEL", "ChatOutputSplitter", "PlainTextParser"]

REASONING_CHANNEL = "analysis"


class ChatOutputSplitter:
    """Feed the generated ids with `add`, call `finish` at the end; each returns (reasoning, content) deltas.
    `stop` is the stop string that ended the content (the caller then stops the request)."""

    def __init__(self, tokenizer: Tokenizer, stops: Sequence[str] = (), include_stop: bool = False) -> None:
        self._parser = HarmonyStreamParser(tokenizer) if tokenizer.uses_harmony else PlainTextParser(tokenizer)
        self._content = StopMatcher(stops, include_stop)

    @property
    def stop(self) -> str | None:
        return self._content.stop

    def add(self, token_ids: Sequence[int]) -> tuple[str, str]:
        return self._split(self._parser.feed(token_ids))

    def finish(self) -> tuple[str, str]:
        reasoning, content = self._split(self._parser.finish())
        return reasoning, content + self._content.finish()

    def _split(self, pieces: list[ChannelText]) -> tuple[str, str]:
        reasoning: list[str] = []
        content: list[str] = []
        for piece in pieces:
            if self._content.stop is not None:
                break
            if piece.channel == REASONING_CHANNEL:
                reasoning.append(piece.text)
            else:
                content.append(self._content.add(piece.text))
        return "".join(reasoning), "".join(content)


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
