"""A chat completion's generated ids, as they arrive, turned into the two texts the chat API returns:
`reasoning_content` (harmony's analysis channel) and `content` (every other channel: final, commentary, and
text that does not follow the format), with the request's stop strings matched on `content` only.

Reasoning never reaches `content`: the split is made on token ids (HarmonyStreamParser), not on decoded text.
"""

from __future__ import annotations

from collections.abc import Sequence

from quickmoe.engine.detokenizer import StopMatcher
from quickmoe.server.harmony_stream import ChannelText, HarmonyStreamParser
from quickmoe.tokenizer.base import Tokenizer

__all__ = ["REASONING_CHANNEL", "ChatOutputSplitter"]

REASONING_CHANNEL = "analysis"


class ChatOutputSplitter:
    """Feed the generated ids with `add`, call `finish` at the end; each returns (reasoning, content) deltas.
    `stop` is the stop string that ended the content (the caller then stops the request)."""

    def __init__(self, tokenizer: Tokenizer, stops: Sequence[str] = (), include_stop: bool = False) -> None:
        self._parser = HarmonyStreamParser(tokenizer)
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
