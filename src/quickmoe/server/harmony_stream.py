"""Incremental harmony parsing: an assistant completion's token ids, as they arrive, split into text per channel.

gpt-oss answers in harmony messages, e.g.

    <|channel|>analysis<|message|>...reasoning...<|end|><|start|>assistant<|channel|>final<|message|>...<|return|>

The server streams the analysis channel as `reasoning_content` and everything else as `content`, so it must know
each token's channel as soon as the token arrives, without waiting for the end of the completion. The parser is
a small state machine over the structural token ids:

- HEADER (from the start of the completion, or from <|start|>): tokens are held back until <|message|> (or a
  message end) closes the header; the header is then interpreted by openai-harmony itself (so channel,
  recipient and role rules are exactly harmony's), replaying only the held header tokens;
- CONTENT (after <|message|>): each token's bytes go through an incremental UTF-8 decoder and are emitted at
  once on the message's channel; <|end|>, <|return|> or <|call|> end the message (every other token, special
  ones included, is content text, as harmony has it);
- EXPECT_START (after a message end): only <|start|> may follow;
- UNPARSED: once the tokens break the format (a model that is not gpt-oss, random weights), every later token's
  text (special tokens left out), and the held-back tokens since the last message end, go to the
  UNPARSED_CHANNEL.

Joined per message, the pieces equal `parse_chat_completion` of the whole sequence however the ids are split
into `feed` calls (tested), with one deliberate difference: a header still open after MAX_HEADER_TOKENS tokens
(harmony's are a handful: `<|channel|>commentary to=functions.f <|constrain|>json`) is taken as text outside the
format at once, where harmony waits for a <|message|> that may never come; otherwise the text of a model that
does not speak harmony could only be sent when the completion ends.
"""

from __future__ import annotations

import codecs
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import openai_harmony as oh

from quickmoe.tokenizer.base import Tokenizer
from quickmoe.tokenizer.chat import UNPARSED_CHANNEL, ChatSegment, harmony_encoding
from quickmoe.tokenizer.vocab import CALL, END, MESSAGE, RETURN

__all__ = ["ChannelText", "HarmonyStreamParser", "join_pieces"]

MAX_HEADER_TOKENS = 32  # longer "headers" are taken as text that does not follow the format
_MESSAGE_ENDS = frozenset((END, RETURN, CALL))
_HEADER_ENDS = _MESSAGE_ENDS | {MESSAGE}


@dataclass(frozen=True)
class ChannelText:
    """A piece of text of one message: `message` counts the completion's messages from 0 (the unparsed rest is
    a message of its own). A message's first piece may be empty: it says which channel the message opened."""

    message: int
    channel: str
    text: str
    recipient: str | None = None


class _State(enum.Enum):
    HEADER = "header"
    CONTENT = "content"
    EXPECT_START = "expect_start"
    UNPARSED = "unparsed"


class HarmonyStreamParser:
    """Splits one assistant completion (the ids generated after `<|start|>assistant`) into channel texts,
    incrementally: `feed(ids)` as tokens arrive, `finish()` at the end; both return the new ChannelText pieces
    (adjacent pieces of one message joined)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._specials = tokenizer.special_token_ids
        self._state = _State.HEADER
        self._first_message = True  # the first header's role (assistant) is given by the prompt
        self._held: list[int] = []  # header tokens of the message being opened
        self._held_messages = 0  # messages harmony already completed from the held tokens (emitted)
        self._since_end: list[int] = []  # tokens after the last message end: the unparsed rest on an error
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._message = -1
        self._channel = "final"
        self._recipient: str | None = None

    def feed(self, token_ids: Iterable[int]) -> list[ChannelText]:
        pieces: list[ChannelText] = []
        for token in token_ids:
            self._step(int(token), pieces)
        return _merged(pieces)

    def finish(self) -> list[ChannelText]:
        """End of the completion: flush a partial UTF-8 character; an unfinished header is unparsed text."""
        pieces: list[ChannelText] = []
        if self._state is _State.HEADER and self._since_end:
            self._fail(pieces)  # harmony: "unexpected EOS while waiting for message header to complete"
        if self._state in (_State.CONTENT, _State.UNPARSED):
            self._emit(pieces, self._decoder.decode(b"", final=True))
        if self._state is not _State.UNPARSED:
            self._state = _State.EXPECT_START
        return _merged(pieces)

    # -- the state machine --------------------------------------------------------------------------
    def _step(self, token: int, pieces: list[ChannelText]) -> None:
        if self._state is _State.UNPARSED:
            if token not in self._specials:
                self._emit(pieces, self._decoder.decode(self._tokenizer.decode_bytes([token])))
            return
        self._since_end.append(token)
        if self._state is _State.CONTENT:
            if token in _MESSAGE_ENDS:
                self._emit(pieces, self._decoder.decode(b"", final=True))
                self._to_expect_start()
            else:
                self._emit(pieces, self._decoder.decode(self._tokenizer.decode_bytes([token])))
            return
        self._held.append(token)
        if self._state is _State.EXPECT_START:  # only <|start|> may come: harmony says whether it did
            self._state = _State.HEADER
            self._replay(pieces)
        elif token in _HEADER_ENDS:
            self._replay(pieces)
        elif len(self._held) > MAX_HEADER_TOKENS:  # no header is this long: text that is not in the format
            self._fail(pieces)

    def _replay(self, pieces: list[ChannelText]) -> None:
        """Run openai-harmony over the held header tokens (after an empty message when this is not the
        completion's first one) and take over its state."""
        parser = oh.StreamableParser(harmony_encoding(), oh.Role.ASSISTANT, strict=False)
        prefix = [] if self._first_message else [MESSAGE, END]  # an empty message: harmony then expects <|start|>
        try:
            for token in prefix + self._held:
                parser.process(token)
        except oh.HarmonyError:
            self._fail(pieces)
            return
        completed = parser.messages[(1 if prefix else 0) + self._held_messages:]
        for message in completed:  # a header closed by a message end: harmony makes it a whole message
            self._open(pieces, message.channel, message.recipient)
            self._emit(pieces, "".join(getattr(part, "text", "") for part in message.content))
        self._held_messages += len(completed)
        if parser.state == oh.StreamState.CONTENT:
            self._open(pieces, parser.current_channel, parser.current_recipient)
            self._held, self._held_messages = [], 0
            self._state = _State.CONTENT
        elif parser.state == oh.StreamState.EXPECT_START:
            self._to_expect_start()
        elif self._held[-1] in _MESSAGE_ENDS:  # harmony took a message end and is still in a header
            self._since_end = []

    def _to_expect_start(self) -> None:
        self._state = _State.EXPECT_START
        self._first_message = False
        self._held, self._held_messages, self._since_end = [], 0, []

    def _fail(self, pieces: list[ChannelText]) -> None:
        """The format broke: the tokens since the last message end, and all later ones, are unparsed text."""
        self._state = _State.UNPARSED
        self._message += 1
        self._channel, self._recipient = UNPARSED_CHANNEL, None
        self._decoder.reset()
        ids = [t for t in self._since_end if t not in self._specials]
        if ids:
            self._emit(pieces, self._decoder.decode(self._tokenizer.decode_bytes(ids)))
        self._held, self._held_messages, self._since_end = [], 0, []

    def _open(self, pieces: list[ChannelText], channel: str | None, recipient: str | None) -> None:
        self._message += 1
        self._channel, self._recipient = channel or "final", recipient
        self._decoder.reset()
        pieces.append(ChannelText(self._message, self._channel, "", self._recipient))

    def _emit(self, pieces: list[ChannelText], text: str) -> None:
        if text:
            pieces.append(ChannelText(self._message, self._channel, text, self._recipient))


def _merged(pieces: list[ChannelText]) -> list[ChannelText]:
    out: list[ChannelText] = []
    for piece in pieces:
        if out and out[-1].message == piece.message:
            last = out[-1]
            out[-1] = ChannelText(last.message, last.channel, last.text + piece.text, last.recipient)
        else:
            out.append(piece)
    return out


def join_pieces(pieces: Sequence[ChannelText]) -> list[ChatSegment]:
    """The pieces of a whole completion as one ChatSegment per message (what `parse_chat_completion` returns);
    an unparsed rest without text is left out, as there."""
    segments: list[ChatSegment] = []
    last_message = None
    for piece in pieces:
        if piece.message == last_message:
            prev = segments[-1]
            segments[-1] = ChatSegment(prev.channel, prev.text + piece.text, prev.recipient)
        else:
            segments.append(ChatSegment(piece.channel, piece.text, piece.recipient))
            last_message = piece.message
    return [s for s in segments if s.channel != UNPARSED_CHANNEL or s.text]
