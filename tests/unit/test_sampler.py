"""The batched sampler against a naive per-row float64 reference, statistics, logprobs, and the new
SamplingParams fields."""

from __future__ import annotations

import math
import random

import pytest
import torch

from quickmoe.engine.sampling_params import GREEDY_BELOW, SamplingParams
from quickmoe.errors import RequestError
from quickmoe.layers.logits_processing import RowContext
from quickmoe.layers.sampler import Sampler, top_k_top_p_mask

# -- naive reference ------------------------------------------------------------------------------------

def reference_kept(row: list[float], p: SamplingParams) -> list[tuple[int, float]]:
    """(token, probability) of the tokens top-k then top-p keep, most likely first, in float64 Python.
    top-p measures mass over the renormalised top-k distribution."""
    scaled = [x / p.temperature for x in row]
    peak = max(scaled)
    weights = [math.exp(x - peak) for x in scaled]
    total = sum(weights)
    probs = [w / total for w in weights]
    order = sorted(range(len(row)), key=lambda t: (-probs[t], t))
    if p.top_k > 0:
        order = order[:p.top_k]
    mass_k = sum(probs[t] for t in order)
    kept, before = [], 0.0
    for t in order:
        if p.top_p < 1 and before >= p.top_p:
            break
        kept.append((t, probs[t]))
        before += probs[t] / mass_k
    return kept


def reference_token(row: list[float], p: SamplingParams, u: float | None) -> int:
    """One token: argmax for greedy rows, else inverse CDF of the renormalised kept distribution at u (in
    descending probability when the row filters, else in token-id order)."""
    if p.greedy:
        return max(range(len(row)), key=lambda t: (row[t], -t))
    kept = reference_kept(row, p)
    if p.top_k == 0 and p.top_p >= 1:
        kept.sort()
    target = u * sum(q for _, q in kept)
    running = 0.0
    for t, q in kept:
        running += q
        if running > target:
            return t
    return kept[-1][0]


def random_params(rng: random.Random, **extra) -> SamplingParams:
    if rng.random() < 0.2:
        return SamplingParams(temperature=0, **extra)
    return SamplingParams(temperature=rng.uniform(0.2, 2.0), top_k=rng.choice([0, 0, 1, 3, 20, 200]),
                          top_p=rng.choice([1.0, 1.0, 0.95, 0.7, 0.3, 0.05]), **extra)


def random_logits(rows: int, vocab: int, seed: int) -> torch.Tensor:
    """Fresh random logits [rows, vocab] float32, each row with its own spread (flat to peaked)."""
    g = torch.Generator().manual_seed(seed)
    scale = torch.rand(rows, 1, generator=g) * 6 + 0.3
    return torch.randn(rows, vocab, generator=g) * scale


def generators(seeds: list[int]) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(s) for s in seeds]


# -- sampling -------------------------------------------------------------------------------------------

def test_tokens_equal_the_naive_reference_over_mixed_params():
    rng = random.Random(7)
    rows, vocab, steps = 240, 400, 3
    params = [random_params(rng) for _ in range(rows)]
    seeds = [rng.randrange(2**31) for _ in range(rows)]
    gens, ref_gens = generators(seeds), generators(seeds)
    sampler = Sampler()
    non_greedy_choices = 0
    for step in range(steps):
        logits = random_logits(rows, vocab, seed=100 + step)
        got = sampler(logits, params, gens).token_ids
        want = []
        for row, p, g in zip(logits.double().tolist(), params, ref_gens):
            u = None if p.greedy else torch.rand((), generator=g, dtype=torch.float64).item()
            want.append(reference_token(row, p, u))
        assert got == want
        argmax = logits.argmax(dim=-1).tolist()
        non_greedy_choices += sum(t != a for t, a in zip(got, argmax))
    assert non_greedy_choices > rows // 2  # really sampled, not argmax in disguise


@pytest.mark.parametrize("params", [
    SamplingParams(temperature=1.0),
    SamplingParams(temperature=0.7, top_k=5),
    SamplingParams(temperature=1.3, top_p=0.8),
    SamplingParams(temperature=0.9, top_k=6, top_p=0.75),
])
def test_frequencies_match_the_filtered_distribution(params):
    vocab, draws = 8, 4000
    row = (torch.randn(1, vocab, generator=torch.Generator().manual_seed(3)) * 1.5)
    got = Sampler()(row.expand(draws, vocab), [params] * draws, generators(list(range(draws)))).token_ids
    kept = dict(reference_kept(row[0].double().tolist(), params))
    mass = sum(kept.values())
    assert set(got) <= set(kept)  # nothing outside top-k / top-p, ever
    for token in range(vocab):
        want = kept.get(token, 0.0) / mass
        assert abs(got.count(token) / draws - want) < 0.03, (token, got.count(token) / draws, want)


def test_top_p_is_measured_over_the_renormalised_top_k():
    # probabilities 0.4, 0.3, 0.2, 0.1. With top_k=2 the kept pair renormalises to 4/7, 3/7: top_p 0.5
    # keeps token 0 alone (4/7 >= 0.5 precedes token 1), although raw mass before token 1 is 0.4 < 0.5.
    row = torch.tensor([[0.4, 0.3, 0.2, 0.1]]).log()
    draws = 2000
    sampler = Sampler()
    only_first = sampler(row.expand(draws, 4), [SamplingParams(top_k=2, top_p=0.5)] * draws,
                         generators(list(range(draws)))).token_ids
    assert set(only_first) == {0}
    pair = sampler(row.expand(draws, 4), [SamplingParams(top_k=2, top_p=0.6)] * draws,
                   generators(list(range(draws)))).token_ids
    assert set(pair) == {0, 1} and abs(pair.count(1) / draws - 3 / 7) < 0.03


def test_top_k_top_p_mask_keeps_the_smallest_prefix_reaching_p():
    sorted_probs = torch.tensor([[0.5, 0.25, 0.1875, 0.0625]] * 5)  # dyadic: sums are exact
    top_k = torch.tensor([0, 0, 0, 0, 3])
    top_p = torch.tensor([0.7, 0.75, 0.7500001, 0.1, 1.0], dtype=torch.float64)
    keep = top_k_top_p_mask(sorted_probs, top_k, top_p)
    assert keep.sum(dim=-1).tolist() == [2, 2, 3, 1, 3]  # mass before must be strictly < top_p
    assert torch.equal(keep, keep.cummin(dim=-1).values)  # a prefix


def test_top_k_1_is_greedy():
    rows = 64
    logits = random_logits(rows, 300, seed=11)
    rng = random.Random(1)
    params = [SamplingParams(temperature=rng.uniform(0.1, 3), top_k=1, top_p=rng.choice([1.0, 0.5]))
              for _ in range(rows)]
    got = Sampler()(logits, params, generators(list(range(rows)))).token_ids
    assert got == logits.argmax(dim=-1).tolist()


def test_seeded_request_draws_the_same_tokens_alone_and_in_any_batch():
    sampler = Sampler()
    target = SamplingParams(temperature=0.9, top_p=0.9, top_k=40, seed=1234)
    vocab, steps = 300, 12
    target_logits = random_logits(steps, vocab, seed=5)
    gen = torch.Generator().manual_seed(1234)  # one generator carried through the steps, as the engine does
    alone = []
    for s in range(steps):
        alone.append(sampler(target_logits[s:s + 1], [target], [gen]).token_ids[0])
    rng = random.Random(9)
    for trial in range(3):
        gen = torch.Generator().manual_seed(1234)
        others = [random_params(rng, logprobs=rng.choice([None, 0, 3])) for _ in range(rng.randint(1, 7))]
        other_gens = [None if p.greedy else torch.Generator().manual_seed(rng.randrange(2**31)) for p in others]
        where = rng.randint(0, len(others))
        in_batch = []
        for s in range(steps):
            batch = random_logits(len(others) + 1, vocab, seed=1000 * trial + s)
            batch[where] = target_logits[s]
            out = sampler(batch, others[:where] + [target] + others[where:],
                          other_gens[:where] + [gen] + other_gens[where:])
            in_batch.append(out.token_ids[where])
        assert in_batch == alone
    assert len(set(alone)) > 1


def test_sampled_row_without_generator_is_a_bug():
    with pytest.raises(AssertionError, match="Generator"):
        Sampler()(random_logits(2, 10, seed=0), [SamplingParams(temperature=0), SamplingParams()], [None, None])


def test_logprobs_are_log_softmax_of_raw_logits():
    rows, vocab = 24, 300
    logits = random_logits(rows, vocab, seed=21)
    rng = random.Random(4)
    params = [random_params(rng, logprobs=rng.choice([None, 0, 1, 5, 20])) for _ in range(rows)]
    out = Sampler()(logits, params, generators(list(range(rows))))
    for i, p in enumerate(params):
        if p.logprobs is None:
            assert out.logprobs[i] is None and out.top_logprobs[i] is None
            continue
        row = logits[i].double().tolist()
        peak = max(row)
        log_total = peak + math.log(sum(math.exp(x - peak) for x in row))
        want = [x - log_total for x in row]
        assert out.logprobs[i] == pytest.approx(want[out.token_ids[i]], abs=1e-5)
        if p.logprobs == 0:
            assert out.top_logprobs[i] is None
            continue
        top = out.top_logprobs[i]
        want_ids = sorted(range(vocab), key=lambda t: -want[t])[:p.logprobs]
        assert [t for t, _ in top] == want_ids
        assert [v for _, v in top] == pytest.approx([want[t] for t in want_ids], abs=1e-5)
        assert all(a[1] >= b[1] for a, b in zip(top, top[1:]))


@pytest.mark.gpu
def test_cuda_tokens_equal_cpu_tokens():
    rng = random.Random(3)
    rows = 128
    params = [random_params(rng, logprobs=rng.choice([None, 0, 4])) for _ in range(rows)]
    logits = random_logits(rows, 201088, seed=2)
    cpu = Sampler()(logits, params, generators(list(range(rows))))
    cuda = Sampler()(logits.cuda(), params, generators(list(range(rows))))
    assert cuda.token_ids == cpu.token_ids
    for a, b in zip(cuda.logprobs, cpu.logprobs):
        assert (a is None) == (b is None) and (a is None or abs(a - b) < 1e-4)


def _bf16_case(rows: int, vocab: int, seed: int):
    """bf16 logits drawn from few values (many ties), mixed params (greedy, sampled, filtered, logprobs,
    penalties), contexts and a bitmask that allows a random ~half of each row's tokens."""
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randint(-40, 40, (rows, vocab), generator=g) / 8).to(torch.bfloat16)  # [R, V]: ties
    rng = random.Random(seed)
    params = []
    for _ in range(rows):
        extra = dict(logprobs=rng.choice([None, 0, 3]))
        if rng.random() < 0.3:
            extra.update(presence_penalty=rng.uniform(-1, 1), repetition_penalty=rng.uniform(0.8, 1.3))
        params.append(random_params(rng, **extra))
    contexts = [RowContext(prompt_ids=[rng.randrange(vocab) for _ in range(5)],
                           output_ids=[rng.randrange(vocab) for _ in range(3)]) for _ in range(rows)]
    words = torch.randint(0, 2**32, (rows, -(-vocab // 32)), generator=g, dtype=torch.int64)
    bitmask = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)  # int32 bit patterns
    return logits, params, contexts, bitmask


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("with_extras", [False, True])
def test_bf16_logits_sample_as_their_float32_widening(device, with_extras):
    """The engine's steps hand the sampler the LM head's bf16 logits: every token, log-probability and top list
    equals what the float32 widening of the same values gives (ties included)."""
    rows, vocab = 64, 700
    logits, params, contexts, bitmask = _bf16_case(rows, vocab, seed=11 + with_extras)
    if not with_extras:
        contexts, bitmask = None, None
        params = [SamplingParams(temperature=p.temperature, top_k=p.top_k, top_p=p.top_p, logprobs=p.logprobs)
                  for p in params]
    seeds = list(range(rows))
    got = Sampler()(logits.to(device), params, generators(seeds), contexts, bitmask)
    want = Sampler()(logits.float().to(device), params, generators(seeds), contexts, bitmask)
    assert got.token_ids == want.token_ids
    assert got.logprobs == want.logprobs
    assert got.top_logprobs == want.top_logprobs
    if not with_extras:  # greedy rows: the naive argmax (first index among ties) of the widened values
        for i, p in enumerate(params):
            if p.greedy:
                assert got.token_ids[i] == reference_token(logits[i].double().tolist(), p, None)


# -- SamplingParams -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, culprit", [
    (dict(top_k=-2), "top_k"), (dict(top_k=2.0), "top_k"), (dict(top_k=True), "top_k"),
    (dict(stop=""), "stop"), (dict(stop=["ok", ""]), "stop"), (dict(stop=["ok", 3]), "stop"),
    (dict(stop=7), "stop"), (dict(include_stop_str_in_output=1), "include_stop_str_in_output"),
    (dict(skip_special_tokens="no"), "skip_special_tokens"), (dict(logprobs=21), "logprobs"),
    (dict(logprobs=-1), "logprobs"), (dict(logprobs=True), "logprobs"), (dict(logprobs=2.0), "logprobs"),
])
def test_new_sampling_fields_reject_invalid_values(kwargs, culprit):
    with pytest.raises(RequestError, match=f"'{culprit}' = "):
        SamplingParams(**kwargs)


def test_new_sampling_fields_normalise():
    assert SamplingParams(top_k=-1).top_k == 0 and SamplingParams(top_k=7).top_k == 7
    assert SamplingParams(stop="###").stop == ("###",)
    assert SamplingParams(stop=["a", "bc"]).stop == ("a", "bc")
    defaults = SamplingParams()
    assert (defaults.top_k, defaults.stop, defaults.include_stop_str_in_output, defaults.skip_special_tokens,
            defaults.logprobs) == (0, (), False, True, None)
    assert SamplingParams(logprobs=0).logprobs == 0 and SamplingParams(logprobs=20).logprobs == 20


@pytest.mark.parametrize("temperature", [1e-300, 5e-324, 1e-39, 1e-20, 9.99e-6])
def test_temperatures_below_the_greedy_threshold_are_greedy(temperature):
    """A temperature that logits / T would overflow (or divide by an underflowing float32) is greedy: the
    argmax, never token 0 of a NaN row."""
    params = SamplingParams(temperature=temperature)
    assert params.greedy and temperature < GREEDY_BELOW
    logits = random_logits(3, 50, seed=7)
    sampled = Sampler()(logits, [params] * 3, [None] * 3)
    assert sampled.token_ids == logits.argmax(dim=-1).tolist()
    assert not SamplingParams(temperature=GREEDY_BELOW).greedy
