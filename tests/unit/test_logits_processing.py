"""Logits processing (min_tokens blocking, logit_bias, repetition/frequency/presence penalties, min_p, token
bitmasks) against a naive float64 reference written from the definitions, and the new SamplingParams fields'
validation."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
import torch

from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.errors import RequestError
from quickmoe.layers.logits_processing import RowContext, apply_min_p, apply_token_bitmask, process_logits
from quickmoe.layers.sampler import Sampler


def reference_row(row: list[float], p: SamplingParams, ctx: RowContext) -> list[float]:
    """The definitions, token by token, in float64 Python."""
    out = [float(x) for x in row]
    for t in ctx.blocked_ids:
        out[t] = -math.inf
    for t, b in p.logit_bias:
        out[t] += b
    counts = Counter(ctx.output_ids)
    for t in set(ctx.prompt_ids) | set(ctx.output_ids):
        out[t] = out[t] / p.repetition_penalty if out[t] > 0 else out[t] * p.repetition_penalty
    for t, c in counts.items():
        out[t] -= p.frequency_penalty * c + p.presence_penalty
    return out


def _random_case(rng: random.Random, vocab: int) -> tuple[SamplingParams, RowContext]:
    kind = rng.random()
    bias = {rng.randrange(vocab): rng.uniform(-100, 100) for _ in range(rng.randint(0, 5))} if kind < 0.7 else {}
    params = SamplingParams(temperature=rng.choice([0, 0.8]), logit_bias=bias, max_tokens=50,
                            repetition_penalty=rng.choice([1.0, 0.7, 1.3, 2.0]),
                            frequency_penalty=rng.choice([0.0, 0.5, -1.2, 2.0]),
                            presence_penalty=rng.choice([0.0, 1.0, -0.4]), min_tokens=rng.choice([0, 5]))
    ctx = RowContext(prompt_ids=[rng.randrange(vocab) for _ in range(rng.randint(0, 30))],
                     output_ids=[rng.randrange(vocab) for _ in range(rng.randint(0, 30))],
                     blocked_ids=tuple(rng.sample(range(vocab), 3)) if rng.random() < 0.3 else ())
    return params, ctx


def test_processed_logits_equal_the_float64_definitions():
    rng = random.Random()
    vocab = 97
    for _ in range(20):
        rows = rng.randint(1, 8)
        cases = [_random_case(rng, vocab) for _ in range(rows)]
        logits = torch.randn(rows, vocab) * 4
        got = process_logits(logits, [p for p, _ in cases], [c for _, c in cases]).double()
        for i, (p, c) in enumerate(cases):
            want = torch.tensor(reference_row(logits[i].tolist(), p, c), dtype=torch.float64)
            finite = torch.isfinite(want)
            assert torch.equal(finite, torch.isfinite(got[i]))
            assert torch.allclose(got[i][finite], want[finite], rtol=1e-6, atol=1e-4)
        assert torch.isfinite(logits).all()  # the input is left as it was


def test_the_sampler_chooses_from_the_processed_logits_and_reports_raw_logprobs():
    vocab = 50
    logits = torch.randn(3, vocab)
    target = [int(logits[i].argmin()) for i in range(3)]  # the least likely token, made the most likely
    params = [SamplingParams(temperature=0, logit_bias={target[0]: 100}, logprobs=1),
              SamplingParams(temperature=0.7, logit_bias={target[1]: 100}, seed=1),
              SamplingParams(temperature=0, min_tokens=3)]
    blocked = int(logits[2].argmax())
    contexts = [None, None, RowContext(blocked_ids=(blocked,))]
    out = Sampler()(logits, params, [None, torch.Generator().manual_seed(1), None], contexts)
    assert out.token_ids[:2] == target[:2]
    assert out.token_ids[2] == int(logits[2].topk(2).indices[1])  # the argmax was blocked: the second best
    raw = torch.log_softmax(logits[0].double(), dim=-1)[target[0]].item()
    assert abs(out.logprobs[0] - raw) < 1e-5  # raw logits' log-probability, before the bias


def test_repeated_tokens_are_penalized_in_the_sampled_distribution():
    """A row whose outputs repeat one token: with a strong frequency penalty it is (almost) never drawn again."""
    vocab = 8
    logits = torch.zeros(1, vocab)
    logits[0, 3] = 2.0
    free, penalized = Counter(), Counter()
    ctx = [RowContext(output_ids=[3, 3, 3])]
    sampler = Sampler()
    for seed in range(300):
        gen = torch.Generator().manual_seed(seed)
        free[sampler(logits, [SamplingParams(seed=seed)], [gen]).token_ids[0]] += 1
        gen = torch.Generator().manual_seed(seed)
        penalized[sampler(logits, [SamplingParams(seed=seed, frequency_penalty=2.0)], [gen], ctx).token_ids[0]] += 1
    assert free[3] > 100  # p = e^2 / (e^2 + 7) = 0.51
    assert penalized[3] < 10  # logit 2 - 6 = -4: p = e^-4 / (e^-4 + 7) = 0.003


def test_min_p_keeps_tokens_at_least_min_p_times_the_top_probability():
    rng = random.Random()
    probs = torch.softmax(torch.randn(6, 40) * 3, dim=-1)
    min_p = torch.tensor([rng.choice([0.0, 0.05, 0.3, 1.0]) for _ in range(6)])
    got = apply_min_p(probs, min_p)
    for i in range(6):
        peak = probs[i].max().item()
        for t in range(40):
            q = probs[i, t].item()
            assert got[i, t].item() == (q if q >= min_p[i].item() * peak else 0.0)


def test_a_token_bitmask_leaves_only_the_allowed_tokens():
    vocab = 70  # three 32-bit words, the last partial
    allowed = [sorted(random.sample(range(vocab), k)) for k in (1, 5, 70)]
    words = torch.zeros(3, 3, dtype=torch.int64)
    for i, ids in enumerate(allowed):
        for t in ids:
            words[i, t // 32] |= 1 << (t % 32)
    bitmask = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)  # as int32 bit patterns
    masked = apply_token_bitmask(torch.randn(3, vocab), bitmask)
    for i, ids in enumerate(allowed):
        assert torch.isfinite(masked[i]).nonzero().flatten().tolist() == ids


@pytest.mark.parametrize("field, value, match", [
    ("n", 0, "'n'"), ("n", 129, "'n'"), ("presence_penalty", 2.5, "presence_penalty"),
    ("frequency_penalty", float("nan"), "frequency_penalty"), ("repetition_penalty", 0, "repetition_penalty"),
    ("repetition_penalty", float("inf"), "repetition_penalty"), ("min_p", 1.5, "min_p"), ("min_tokens", 17, "min_tokens"),
    ("min_tokens", -1, "min_tokens"), ("logit_bias", {"x": 1}, "logit_bias"), ("logit_bias", {5: 101}, "logit_bias"),
    ("prompt_logprobs", 21, "prompt_logprobs"), ("logit_bias", {5: True}, "logit_bias"),
])
def test_bad_new_fields_are_refused_by_name(field, value, match):
    with pytest.raises(RequestError, match=match):
        SamplingParams(max_tokens=16, **{field: value})


def test_logit_bias_keys_may_be_json_strings_and_are_normalised():
    p = SamplingParams(logit_bias={"7": 1.5, 3: -2})
    assert p.logit_bias == ((3, -2.0), (7, 1.5))
    assert hash(p)  # frozen and hashable
    assert SamplingParams(repetition_penalty=1.2).needs_host_state
    assert not SamplingParams(min_tokens=3, logit_bias={1: 2}, min_p=0.1).needs_host_state
