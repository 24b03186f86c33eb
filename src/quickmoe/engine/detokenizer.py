"""Incremental detokenization of one request: token ids in, text pieces out, safe to stream.

Tokens stand for bytes, and a token may end inside a UTF-8 character, so the bytes go through an
incremental UTF-8 decoder that holds an incomplete tail back (invalid bytes become U+FFFD, as in
`Tokenizer.decode`). Stop strings are matched on the decoded text; the last (longest stop string
length - 1) characters are held back while streaming, so that text already emitted never has to be
taken back when a stop string completes in a later token.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence

from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.tokenizer.base import Tokenizer


def find_stop(text: str, stops: Sequence[str]) -> tuple[int, str] | None:
    """(start, stop string) of the stop string occurrence in `text` that ends first; at equal ends the
    one that starts first (the longest). None when no stop string occurs.

    Ending first is what makes streaming agree with decoding all at once: a generation stops as soon
    as a stop string is complete, before any later (or longer, overlapping) one could complete.
    """
    best: tuple[int, int, str] | None = None  # (end, start, stop)
    for stop in stops:
        start = text.find(stop)
        if start >= 0:
            candidate = (start + len(stop), start, stop)
            if best is None or candidate[:2] < best[:2]:
                best = candidate
    return None if best is None else (best[1], best[2])


class StopMatcher:
    """Streams text up to the first stop string to complete (just before it, or after it with `include`),
    holding back the last (longest stop - 1) characters, which a later piece may complete into a stop."""

    def __init__(self, stops: Sequence[str], include: bool = False) -> None:
        self._stops = tuple(stops)
        self._include = include
        self._hold = max((len(s) for s in self._stops), default=1) - 1
        self._pending = ""
        self.stop: str | None = None

    def add(self, text: str) -> str:
        if self.stop is not None:
            return ""
        if not self._stops:
            return text
        buffer = self._pending + text
        # no stop string starts in text already emitted: it would end within the `_hold` characters held back
        # then, so it would have matched then
        match = find_stop(buffer, self._stops)
        if match is not None:
            start, self.stop = match
            self._pending = ""
            return buffer[:start + len(self.stop) if self._include else start]
        keep = max(len(buffer) - self._hold, 0)
        emitted, self._pending = buffer[:keep], buffer[keep:]
        return emitted

    def finish(self) -> str:
        emitted, self._pending = ("" if self.stop is not None else self._pending), ""
        return emitted


class IncrementalDetokenizer:
    """Turns one request's generated token ids into text, piece by piece.

    Feed the ids with `add` (one token or many at a time; the pieces do not depend on how the ids are
    grouped) and call `finish` at the end of the request. Everything `add` and `finish` return, joined,
    is `text`. Without stop strings that is `tokenizer.decode` of the ids (special tokens left out
    with `params.skip_special_tokens`). With stop strings, the text ends at the first stop string
    to complete (just before it, or just after it with `params.include_stop_str_in_output`),
    `stop_string` names it and nothing more is emitted. Stop token ids (EOS, ...) are not passed here.
    """

    # The emitted pieces are joined every JOIN_AT of them: a list of one piece per token would be scanned element by
    # element by every full pass of the cyclic collector while the request runs (strings are not tracked; the list
    # is); a join copies the text so far, once every 32 pieces.
    JOIN_AT = 32

    def __init__(self, tokenizer: Tokenizer, params: SamplingParams) -> None:
        self._tokenizer = tokenizer
        self._skip_ids = tokenizer.special_token_ids if params.skip_special_tokens else frozenset()
        self._stop = StopMatcher(params.stop, params.include_stop_str_in_output)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pieces: list[str] = []  # emitted text, joined every JOIN_AT pieces
        self._finished = False

    @property
    def text(self) -> str:
        """Everything emitted so far."""
        if len(self._pieces) > 1:
            self._pieces = ["".join(self._pieces)]
        return self._pieces[0] if self._pieces else ""

    @property
    def stop_string(self) -> str | None:
        """The stop string that ended the text, once one did."""
        return self._stop.stop

    @property
    def stopped(self) -> bool:
        """Whether a stop string matched (the request's text is complete)."""
        return self.stop_string is not None

    def add(self, token_ids: Sequence[int]) -> str:
        """Decodes more generated ids; returns the new text that is safe to emit now ("" once stopped)."""
        assert not self._finished, "add() after finish()"
        if self.stopped:
            return ""
        ids = [t for t in token_ids if t not in self._skip_ids] if self._skip_ids else token_ids
        new_text = self._decoder.decode(self._tokenizer.decode_bytes(ids)) if ids else ""
        return self._advance(new_text, final=False)

    def finish(self) -> str:
        """At the end of the request: the held-back text, with an incomplete UTF-8 tail as U+FFFD."""
        assert not self._finished, "finish() twice"
        self._finished = True
        if self.stopped:
            return ""
        return self._advance(self._decoder.decode(b"", final=True), final=True)

    def _advance(self, new_text: str, final: bool) -> str:
        """Passes decoded text through the stop matcher; at the end, releases what it held back."""
        emitted = self._stop.add(new_text) + (self._stop.finish() if final else "")
        if emitted:
            self._pieces.append(emitted)
            if len(self._pieces) >= self.JOIN_AT:
                self._pieces = ["".join(self._pieces)]
        return emitted
