"""RequestChecker.prompt_ids on token-id prompts, against a reference written here from its definition: a prompt of
ids is a Sequence (not a string or bytes) of integers (bool excluded; numpy integers count), not empty, each in
[0, vocab), fewer than max_model_len of them; it comes back as a list of Python ints, and a refusal names what is
wrong (the first id out of the vocabulary)."""

from __future__ import annotations

import numbers
import random
from collections.abc import Sequence

import numpy as np
import pytest

from quickmoe.engine.request_checks import RequestChecker
from quickmoe.errors import RequestError

VOCAB, MAX_LEN = 50, 16


def reference(prompt) -> list[int] | str:
    """The ids, or the refusal's message."""
    if isinstance(prompt, (bytes, bytearray)) or not isinstance(prompt, Sequence):
        return "expected a string or a list of integer token ids"
    for t in prompt:
        if isinstance(t, bool) or not isinstance(t, numbers.Integral):
            return "expected a string or a list of integer token ids"
    ids = [int(t) for t in prompt]
    if not ids:
        return "empty prompt"
    for t in ids:
        if t < 0 or t >= VOCAB:
            return f"token id {t} is outside the model's vocabulary [0, {VOCAB})"
    if len(ids) >= MAX_LEN:
        return f"{len(ids)} tokens leave no room"
    return ids


def _element(rng: random.Random):
    kind = rng.random()
    if kind < 0.85:
        return rng.randrange(0, VOCAB)
    return rng.choice([-1, VOCAB, VOCAB + 7, True, False, np.int64(3), np.int32(VOCAB - 1), np.int64(VOCAB), 2.0,
                       "7", None])


def _prompt(rng: random.Random):
    elements = [_element(rng) if rng.random() < 0.3 else rng.randrange(0, VOCAB) for _ in range(rng.randrange(0, 20))]
    container = rng.choice(["list", "list", "list", "tuple", "array"])
    if container == "array":  # not a Sequence: refused whatever it holds
        return np.array(elements, dtype=object)
    return tuple(elements) if container == "tuple" else elements


def _kind(outcome: list[int] | str) -> str:
    if isinstance(outcome, list):
        return "accepted"
    return next(k for k, words in (("not ids", "expected"), ("empty", "empty"), ("vocabulary", "outside"),
                                   ("length", "no room")) if words in outcome)


def test_token_id_prompts_get_the_references_ids_or_refusal():
    checker = RequestChecker(tokenizer=None, vocab_size=VOCAB, max_model_len=MAX_LEN)
    rng = random.Random()
    kinds = set()
    for _ in range(3000):
        prompt = _prompt(rng)
        want = reference(prompt)
        kinds.add(_kind(want))
        if isinstance(want, list):
            got = checker.prompt_ids(prompt)
            assert got == want and all(type(t) is int for t in got), prompt
        else:
            with pytest.raises(RequestError) as info:
                checker.prompt_ids(prompt)
            assert want in str(info.value), (prompt, str(info.value))
    assert kinds == {"accepted", "not ids", "empty", "vocabulary", "length"}  # every branch was taken


def test_stop_token_ids_and_logit_bias_outside_the_vocabulary_are_refused():
    """A stop id (or a biased id) the model cannot produce would silently do nothing: `params` refuses it, naming the
    parameter and the first such id; ids inside the vocabulary pass unchanged."""
    from quickmoe.engine.sampling_params import SamplingParams

    checker = RequestChecker(tokenizer=None, vocab_size=VOCAB, max_model_len=MAX_LEN)
    rng = random.Random()
    for _ in range(50):
        inside = [rng.randrange(0, VOCAB) for _ in range(rng.randrange(1, 5))]
        outside = rng.randrange(VOCAB, 4 * VOCAB)
        params = SamplingParams(stop_token_ids=tuple(inside), logit_bias={t: 1.0 for t in inside})
        assert checker.params("r", params) is params
        for field, kwargs in (("stop_token_ids", {"stop_token_ids": (*inside, outside)}),
                              ("logit_bias", {"logit_bias": {**{t: 1.0 for t in inside}, outside: -1.0}})):
            with pytest.raises(RequestError, match=f"'{field}': token id {outside} is outside the model's vocabulary"):
                checker.params("r", SamplingParams(**kwargs))


def test_list_and_tuple_prompts_of_plain_ints_take_the_fast_path():
    """LLM.generate and bench generate pass tuples: a tuple of plain ints is checked as fast as a list (in C), not id
    by id through the ABC checks (0.4 s of 256 x 1,000 ids outside the steps of `bench generate` on the H200, about
    ten times the list's time here). The tuple's check may take at most three times the list's (best of three)."""
    import time

    checker = RequestChecker(tokenizer=None, vocab_size=200_000, max_model_len=10**7)
    rng = random.Random()
    ids = [rng.randrange(0, 200_000) for _ in range(200_000)]
    best = {}
    for prompt in (ids, tuple(ids)):
        times = []
        for _ in range(3):
            start = time.perf_counter()
            got = checker.prompt_ids(prompt)
            times.append(time.perf_counter() - start)
            assert got == ids
        best[type(prompt).__name__] = min(times)
    assert best["tuple"] <= 3 * best["list"], best
