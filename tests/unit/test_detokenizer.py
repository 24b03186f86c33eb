"""The incremental detokenizer with the real tokenizers: split UTF-8 characters, stop strings,
special tokens, and random token streams against one-shot decoding."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from quickmoe.engine.detokenizer import IncrementalDetokenizer
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.tokenizer import HFTokenizer, O200kHarmonyTokenizer, Tokenizer, write_tokenizer_files

CHANNEL, MESSAGE, END = 200005, 200008, 200007
SPLIT_TEXT = "Robots 🤖🚀 say 日本語のテキスト, 한국어, emoji 👨‍👩‍👧‍👦 🇫🇷 👍🏽 and é\u0301!"


@pytest.fixture(scope="module")
def tok() -> O200kHarmonyTokenizer:
    return O200kHarmonyTokenizer()


@pytest.fixture(scope="module")
def hf_tok(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    directory: Path = tmp_path_factory.mktemp("hf-tokenizer")
    write_tokenizer_files(directory)
    return HFTokenizer(directory)  # through `tokenizers` (load_tokenizer may recognise the file as o200k_harmony)


def stream(tokenizer: Tokenizer, params: SamplingParams, ids: Sequence[int],
           chunks: Sequence[int] | None = None) -> tuple[list[str], IncrementalDetokenizer]:
    """Feeds `ids` in chunks of the given sizes (default: one at a time); returns the pieces (finish()'s
    last) and the detokenizer."""
    detok = IncrementalDetokenizer(tokenizer, params)
    pieces, at = [], 0
    for size in chunks if chunks is not None else [1] * len(ids):
        pieces.append(detok.add(ids[at:at + size]))
        at += size
    assert at == len(ids)
    pieces.append(detok.finish())
    return pieces, detok


def random_chunks(count: int, rng: random.Random) -> list[int]:
    sizes = []
    while count:
        sizes.append(min(count, rng.choice([1, 1, 2, 3, 7])))
        count -= sizes[-1]
    return sizes


def reference_stop_text(text: str, stops: Sequence[str], include: bool) -> tuple[str, str | None]:
    """The text a request ends with: cut at the stop string that completes first (at equal ends, the
    longest), scanning end positions one character at a time."""
    for end in range(len(text) + 1):
        matches = [s for s in stops if text.endswith(s, 0, end)]
        if matches:
            stop = max(matches, key=len)
            return text[:end] if include else text[:end - len(stop)], stop
    return text, None


# -- UTF-8 --------------------------------------------------------------------------------------------

def test_characters_split_across_tokens_are_emitted_whole(tok):
    ids = tok.encode(SPLIT_TEXT)
    split = [t for t in ids if not _valid_utf8(tok.decode_bytes([t]))]
    assert len(split) >= 4  # the precondition: several tokens end inside a character
    pieces, detok = stream(tok, SamplingParams(), ids)
    assert not any("\ufffd" in piece for piece in pieces)
    assert "".join(pieces) == detok.text == SPLIT_TEXT == tok.decode(ids)
    assert pieces.count("") >= 1  # some tokens had to wait for the rest of their character


def test_incomplete_tail_is_flushed_as_replacement_character(tok):
    ids = tok.encode("ok 🤖")
    cut = next(i for i in range(1, len(ids) + 1) if not _valid_utf8(tok.decode_bytes(ids[:i])))
    pieces, detok = stream(tok, SamplingParams(), ids[:cut])
    assert "\ufffd" not in "".join(pieces[:-1]) and pieces[-1].endswith("\ufffd")
    assert detok.text == tok.decode(ids[:cut])


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_chunking_does_not_change_the_text(tok, seed):
    rng = random.Random(seed)
    ids = tok.encode(SPLIT_TEXT * 3)
    params = SamplingParams(stop=["テキスト, 한", "and é"] if seed % 2 else ())
    one_at_a_time, first = stream(tok, params, ids)
    all_at_once, second = stream(tok, params, ids, [len(ids)])
    chunked, third = stream(tok, params, ids, random_chunks(len(ids), rng))
    assert first.text == second.text == third.text == "".join(one_at_a_time) == "".join(chunked)
    assert first.stop_string == second.stop_string == third.stop_string


# -- stop strings -------------------------------------------------------------------------------------

@pytest.mark.parametrize("include", [False, True])
def test_stop_string_spanning_tokens_is_cut(tok, include):
    text = "The answer is forty-two. Now the rest of the story goes on and on."
    stop = "forty-two. Now"
    ids = tok.encode(text)
    assert not any(stop in tok.decode([t]) for t in ids)  # spans several tokens
    detok = IncrementalDetokenizer(tok, SamplingParams(stop=[stop], include_stop_str_in_output=include))
    pieces = [detok.add([t]) for t in ids]
    stopped_at = next(i for i in range(len(ids)) if stop in tok.decode(ids[:i + 1]))
    assert detok.stop_string == stop and not any(pieces[stopped_at + 1:])  # nothing after the stop
    pieces.append(detok.finish())
    want = "The answer is forty-two. Now" if include else "The answer is "
    assert detok.text == "".join(pieces) == want and pieces[-1] == ""


@pytest.mark.parametrize("include", [False, True])
def test_stop_string_inside_one_token(tok, include):
    ids = tok.encode("Hello wonderful world")
    detok = IncrementalDetokenizer(tok, SamplingParams(stop="onder", include_stop_str_in_output=include))
    pieces = [detok.add([t]) for t in ids] + [detok.finish()]
    assert "".join(pieces) == detok.text == ("Hello wonder" if include else "Hello w")


def test_earliest_completed_stop_wins(tok):
    ids = tok.encode("xx abcd yy bc")
    assert stream(tok, SamplingParams(stop=["abcd", "bc"]), ids)[1].text == "xx a"
    detok = stream(tok, SamplingParams(stop=["bcd", "abcd"]), ids)[1]  # same end: the longer one
    assert detok.text == "xx " and detok.stop_string == "abcd"
    detok = stream(tok, SamplingParams(stop=["yy", "xx"]), ids)[1]  # not the list order
    assert detok.text == "" and detok.stop_string == "xx"


def test_streamed_text_is_never_retracted_and_held_back_minimally(tok):
    # near misses of the stop string all along, then the stop string itself
    text = "aab aaab aaaab aaa|b aaaa aaab|ab|aa tail"
    stops = ("aaab|a", "b|ab|a")
    ids = tok.encode(text)
    detok = IncrementalDetokenizer(tok, SamplingParams(stop=stops))
    hold = max(map(len, stops)) - 1
    emitted = ""
    for i in range(len(ids)):
        emitted += detok.add(ids[i:i + 1])
        if detok.stop_string is None:  # all but the last `hold` characters are out
            decoded = tok.decode_bytes(ids[:i + 1]).decode("utf-8", errors="ignore")
            assert emitted == decoded[:max(0, len(decoded) - hold)]
    emitted += detok.finish()
    assert emitted == detok.text == reference_stop_text(text, stops, False)[0] == "aab aaab aaaab aaa|b aaaa "


@pytest.mark.parametrize("seed", range(6))
def test_random_texts_with_stops_match_the_reference(tok, seed):
    rng = random.Random(seed)
    alphabet = "ab \n🤖é"
    stops = tuple({"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5))) for _ in range(3)})
    include = bool(seed % 2)
    for _ in range(40):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        ids = tok.encode(text)
        pieces, detok = stream(tok, SamplingParams(stop=stops, include_stop_str_in_output=include), ids,
                               random_chunks(len(ids), rng))
        want, stop = reference_stop_text(text, stops, include)
        assert "".join(pieces) == detok.text == want and detok.stop_string == stop, (text, stops)


# -- special tokens -----------------------------------------------------------------------------------

def test_special_token_ids(tok, hf_tok):
    assert tok.special_token_ids == frozenset(range(199998, 201088))
    assert hf_tok.special_token_ids == tok.special_token_ids
    assert not tok.special_token_ids & set(tok.encode("<|channel|> plain text " + SPLIT_TEXT))


@pytest.mark.parametrize("skip", [True, False])
def test_special_tokens_skipped_or_kept(tok, hf_tok, skip):
    emoji = tok.encode("🤖")
    ids = tok.encode("Hello") + [CHANNEL] + tok.encode("final") + [MESSAGE] + emoji[:1] + [END] + emoji[1:]
    for tokenizer in (tok, hf_tok):
        pieces, detok = stream(tokenizer, SamplingParams(skip_special_tokens=skip), ids)
        if skip:  # the emoji's bytes join again across the skipped <|end|>
            assert detok.text == "Hellofinal🤖"
        else:
            assert detok.text == "Hello<|channel|>final<|message|>\ufffd<|end|>\ufffd" == tok.decode(ids)
        assert "".join(pieces) == detok.text


@pytest.mark.parametrize("seed", range(5))
def test_random_token_streams_equal_one_shot_decode(tok, hf_tok, seed):
    rng = random.Random(seed)
    tokenizer = tok if seed % 2 else hf_tok
    ids = [rng.randrange(199998) if rng.random() < 0.9 else rng.randrange(199998, 201088) for _ in range(400)]
    for skip in (True, False):
        pieces, detok = stream(tokenizer, SamplingParams(skip_special_tokens=skip), ids,
                               random_chunks(len(ids), rng))
        plain = [t for t in ids if not skip or t not in tokenizer.special_token_ids]
        assert len(plain) < len(ids) or not skip
        assert "".join(pieces) == detok.text == tokenizer.decode(plain)


def test_a_long_stream_keeps_few_pieces(tok):
    """The emitted text is joined every JOIN_AT pieces while it streams (the collector scans a long list element by
    element: test_gc_pause.py), and the text stays exact; read `text` only at the end."""
    rng = random.Random()
    ids = [rng.randrange(1000, 150000) for _ in range(300)]
    detok = IncrementalDetokenizer(tok, SamplingParams())
    emitted = [detok.add([t]) for t in ids]
    assert sum(1 for e in emitted if e) > 3 * IncrementalDetokenizer.JOIN_AT  # many pieces were emitted
    assert len(detok._pieces) < IncrementalDetokenizer.JOIN_AT  # what the list holds while the request runs
    emitted.append(detok.finish())
    assert "".join(emitted) == detok.text == tok.decode(ids)


def _valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
