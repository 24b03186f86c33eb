"""Chat stop strings, matched by the server on the content: however the text is split into pieces, the streamed
content is the whole text cut at the stop string that ends first (before it, or after it when included)."""

from __future__ import annotations

import random

from quickmoe.engine.detokenizer import StopMatcher, find_stop
from quickmoe.server.chat_output import ChatOutputSplitter
from quickmoe.tokenizer import load_tokenizer
from quickmoe.tokenizer.vocab import CHANNEL, END, MESSAGE, RETURN, START


def _split(text: str, rng: random.Random) -> list[str]:
    pieces, i = [], 0
    while i < len(text):
        n = rng.randint(0, 5)
        pieces.append(text[i:i + n])
        i += n
    return pieces


def test_stop_strings_cut_the_content_however_it_is_split():
    rng = random.Random()
    seed = rng.randrange(2**32)
    rng.seed(seed)
    for case in range(500):
        text = "".join(rng.choice("abc d\n") for _ in range(rng.randint(0, 40)))
        stops = ["".join(rng.choice("abc d\n") for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(0, 3))]
        include = rng.random() < 0.3
        matcher = StopMatcher(stops, include)
        streamed = "".join(matcher.add(piece) for piece in _split(text, rng)) + matcher.finish()
        match = find_stop(text, stops) if stops else None
        if match is None:
            expected, stop = text, None
        else:
            start, stop = match
            expected = text[:start + len(stop)] if include else text[:start]
        assert (streamed, matcher.stop) == (expected, stop), f"seed {seed} case {case}"


def test_the_splitter_keeps_reasoning_out_of_content_and_stops_on_content_only():
    tok = load_tokenizer(None)
    ids = ([CHANNEL] + tok.encode("analysis") + [MESSAGE] + tok.encode("the word STOP is in my reasoning") + [END, START]
           + tok.encode("assistant") + [CHANNEL] + tok.encode("final") + [MESSAGE] + tok.encode("Answer: 4. STOP here")
           + [RETURN])
    splitter = ChatOutputSplitter(tok, stops=["STOP"])
    reasoning, content = "", ""
    for token in ids:
        r, c = splitter.add([token])
        reasoning, content = reasoning + r, content + c
        if splitter.stop:
            break
    assert splitter.stop == "STOP"
    assert reasoning == "the word STOP is in my reasoning"
    assert content == "Answer: 4. "
