"""The incremental harmony parser: joined per message, its pieces equal parse_chat_completion of the whole
completion, however the ids are split, for well-formed, truncated and broken completions."""

from __future__ import annotations

import random

import pytest

from quickmoe.server.harmony_stream import MAX_HEADER_TOKENS, ChannelText, HarmonyStreamParser, join_pieces
from quickmoe.tokenizer import load_tokenizer
from quickmoe.tokenizer.chat import UNPARSED_CHANNEL, ChatSegment, parse_chat_completion
from quickmoe.tokenizer.vocab import CALL, CHANNEL, CONSTRAIN, END, ENDOFTEXT, MESSAGE, RETURN, START

TEXTS = ["Hello there", " think hard about 2+2", "日本語のテキスト", "émoji 🎉 ok", "x", "", "a\nb\n\nc",
         " to", "<|end|> literally", "analysis final"]
STRUCTURAL = [CHANNEL, MESSAGE, END, START, RETURN, CALL, CONSTRAIN, ENDOFTEXT, 200100]


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(None)


def _message(tok, rng: random.Random, first: bool) -> list[int]:
    ids = [] if first else [START] + tok.encode("assistant")
    kind = rng.random()
    if kind < 0.4:
        ids += [CHANNEL] + tok.encode("analysis")
    elif kind < 0.75:
        ids += [CHANNEL] + tok.encode("final")
    elif kind < 0.9:
        ids += [CHANNEL] + tok.encode("commentary to=functions.get_weather") + [CONSTRAIN] + tok.encode("json")
    ids += [MESSAGE] + tok.encode(rng.choice(TEXTS) + rng.choice(TEXTS))
    return ids + [rng.choice([END, END, END, RETURN, CALL])]


def _completion(tok, rng: random.Random) -> list[int]:
    ids: list[int] = []
    for i in range(rng.randint(1, 3)):
        ids += _message(tok, rng, first=i == 0)
    mode = rng.random()
    if mode < 0.3:  # cut anywhere (max_tokens)
        ids = ids[:rng.randint(0, len(ids))]
    elif mode < 0.6:  # structural or random tokens inserted anywhere (a model that breaks the format)
        for _ in range(rng.randint(1, 3)):
            token = rng.choice(STRUCTURAL + [rng.randrange(200000) for _ in range(3)])
            ids.insert(rng.randint(0, len(ids)), token)
    elif mode < 0.7:  # bytes that are not valid UTF-8, and characters split across tokens
        ids.insert(rng.randint(0, len(ids)), rng.choice([124, 125, 126, 100, 101]))
    elif mode < 0.8:  # random weights: any ids
        ids = [rng.randrange(201088) for _ in range(rng.randint(0, MAX_HEADER_TOKENS))]
    return ids


def _parse_in_pieces(tok, ids: list[int], rng: random.Random) -> list[ChannelText]:
    parser = HarmonyStreamParser(tok)
    pieces, i = [], 0
    while i < len(ids):
        n = rng.randint(1, 4)
        pieces += parser.feed(ids[i:i + n])
        i += n
    return pieces + parser.finish()


def test_random_completions_split_anywhere_equal_the_whole_parse(tok):
    rng = random.Random()  # fresh inputs every run; the seed is printed on failure
    seed = rng.randrange(2**32)
    rng.seed(seed)
    for case in range(400):
        ids = _completion(tok, rng)
        expected = parse_chat_completion(ids)
        got = join_pieces(_parse_in_pieces(tok, ids, rng))
        assert got == expected, f"seed {seed} case {case}: ids {ids}"


def test_reasoning_then_final_streams_by_channel(tok):
    ids = ([CHANNEL] + tok.encode("analysis") + [MESSAGE] + tok.encode("Let me think.") + [END, START]
           + tok.encode("assistant") + [CHANNEL] + tok.encode("final") + [MESSAGE] + tok.encode("The answer is 4.")
           + [RETURN])
    parser = HarmonyStreamParser(tok)
    pieces = [p for t in ids for p in parser.feed([t])] + parser.finish()
    assert "".join(p.text for p in pieces if p.channel == "analysis") == "Let me think."
    assert "".join(p.text for p in pieces if p.channel == "final") == "The answer is 4."
    # text comes out as its tokens arrive: the first analysis piece right after its first content token
    parser = HarmonyStreamParser(tok)
    head = [CHANNEL] + tok.encode("analysis") + [MESSAGE]
    assert parser.feed(head) == [ChannelText(0, "analysis", "")]
    assert parser.feed(tok.encode("Let")) == [ChannelText(0, "analysis", "Let")]


def test_a_character_split_across_tokens_is_emitted_whole(tok):
    raw = "日".encode()
    byte_tokens = [next(t for t in range(256) if tok.decode_bytes([t]) == raw[i:i + 1]) for i in range(len(raw))]
    parser = HarmonyStreamParser(tok)
    parser.feed([CHANNEL] + tok.encode("final") + [MESSAGE])
    assert parser.feed(byte_tokens[:1]) == [] and parser.feed(byte_tokens[1:2]) == []  # held: part of a character
    assert parser.feed(byte_tokens[2:]) == [ChannelText(0, "final", "日")]


def test_text_outside_the_format_streams_after_at_most_a_header_s_worth_of_tokens(tok):
    rng = random.Random()
    ids = [rng.randrange(1000, 190000) for _ in range(MAX_HEADER_TOKENS + 12)]
    parser = HarmonyStreamParser(tok)
    early = parser.feed(ids[:MAX_HEADER_TOKENS])
    assert early == []  # still possibly a header
    streamed = [parser.feed([t]) for t in ids[MAX_HEADER_TOKENS:]]
    assert streamed[0]  # the tokens held so far come out as soon as the header is too long
    later = streamed[1:]  # then each token's text as it comes (a token may end inside a UTF-8 character)
    assert sum(1 for ps in later if ps) >= len(later) // 2
    assert all(p.channel == UNPARSED_CHANNEL for ps in streamed for p in ps)
    pieces = early + [p for ps in streamed for p in ps] + parser.finish()
    assert join_pieces(pieces) == [ChatSegment(UNPARSED_CHANNEL, tok.decode(ids))]


def test_random_ids_become_unparsed_text(tok):
    rng = random.Random()
    ids = [rng.randrange(1000, 190000) for _ in range(12)]
    parser = HarmonyStreamParser(tok)
    pieces = parser.feed(ids) + parser.finish()
    assert join_pieces(pieces) == [ChatSegment(UNPARSED_CHANNEL, tok.decode(ids))]
