"""Automatic prefix caching in the engine (CPU, float32, a model with 16-token sliding windows so that sliding
groups release blocks): a request sharing a 1,000-token prefix with an earlier one computes only its new tokens
(scheduler counters) and gets the same greedy tokens as with caching off; random traffic with shared prefixes,
aborts, n > 1 and preemption gives every request the tokens it gets without caching and ends with every block
free."""

from __future__ import annotations

import random

import pytest

from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.llm import LLM

from .conftest import CPU_FLOAT32, GREEDY

CKPT_SEED = 23
ON = CPU_FLOAT32


def _ids(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(1000) for _ in range(n)]


def test_a_shared_1000_token_prefix_is_computed_once(engine_model_dir):
    rng = random.Random()
    prefix = _ids(rng, 1000)
    first, second = prefix + _ids(rng, 30), prefix + _ids(rng, 41)
    params = SamplingParams(max_tokens=6, **GREEDY)
    cached = LLM(engine_model_dir, **ON, max_model_len=1100)
    sched = cached.engine.scheduler
    a = cached.generate([first], params)[0]
    before = (sched.num_scheduled_tokens, sched.num_prefix_hits, sched.num_prefix_queries)
    b = cached.generate([second], params)[0]
    hit = (1000 // 16) * 16  # the full blocks of the shared prefix
    assert sched.num_prefix_hits - before[1] == hit
    assert sched.num_prefix_queries - before[2] == len(second)
    assert sched.num_scheduled_tokens - before[0] == len(second) - hit + params.max_tokens - 1
    plain = LLM(engine_model_dir, **ON, max_model_len=1100, enable_prefix_caching=False)
    assert [o.token_ids for o in plain.generate([first, second], params)] == [a.token_ids, b.token_ids]
    assert plain.engine.scheduler.num_prefix_hits == 0
    # the same prompt again: all of it but its last token comes from the cache
    again = cached.generate([second], params)[0]
    assert again.token_ids == b.token_ids and sched.num_prefix_hits - before[1] == hit + (len(second) - 1) // 16 * 16


def test_n_samples_share_the_prompt_blocks(engine_model_dir):
    rng = random.Random()
    prompt = _ids(rng, 200)
    llm = LLM(engine_model_dir, **ON, max_model_len=300)
    engine = llm.engine
    engine.add_request("n", prompt, SamplingParams(n=4, max_tokens=3, temperature=1.0, seed=5, ignore_eos=True))
    while engine.has_unfinished():
        engine.step()
    hit = (len(prompt) - 1) // 16 * 16
    assert engine.scheduler.num_prefix_hits == 3 * hit  # samples 1..3 took sample 0's full blocks
    assert engine.scheduler.num_scheduled_tokens == len(prompt) + 3 * (len(prompt) - hit) + 4 * 2
    assert engine.blocks.num_sequences == 0


@pytest.mark.parametrize("seed", range(2))
def test_random_traffic_with_shared_prefixes_gives_the_uncached_tokens_and_frees_every_block(engine_model_dir, seed):
    rng = random.Random(seed * 7919 + random.randrange(10**6))
    prefixes = [_ids(rng, rng.randint(16, 90)) for _ in range(3)]
    requests = []
    for i in range(40):
        prompt = rng.choice(prefixes)[:rng.randint(10, 90)] + _ids(rng, rng.randint(0, 20))
        n = rng.choice([1, 1, 1, 2])
        requests.append((f"r{i}", prompt, SamplingParams(max_tokens=rng.randint(8, 40), n=n, **GREEDY)))
    common = dict(max_model_len=160, num_kv_blocks=14, max_num_batched_tokens=48, max_num_seqs=6)
    reference = LLM(engine_model_dir, **ON, **common, enable_prefix_caching=False)
    want = {rid: out.token_ids for (rid, _, _), out in zip(requests, reference.generate(
        [p for _, p, _ in requests], [sp if sp.n == 1 else SamplingParams(max_tokens=sp.max_tokens, **GREEDY)
                                       for _, _, sp in requests]))}
    cached = LLM(engine_model_dir, **ON, **common)
    engine = cached.engine
    got: dict[tuple[str, int], list[int]] = {}
    aborted = set()
    pending = list(requests)
    steps = 0
    while pending or engine.has_unfinished():
        for _ in range(rng.randint(0, 3)):
            if pending:
                rid, prompt, sp = pending.pop(0)
                engine.add_request(rid, prompt, sp)
        if steps % 7 == 3 and rng.random() < 0.5:
            victim = rng.choice(requests)[0]
            engine.abort(victim)
            aborted.add(victim)
        for out in engine.step():
            got.setdefault((out.request_id, out.index), []).extend(out.token_ids)
        steps += 1
    assert engine.scheduler.num_preemptions > 0 and engine.scheduler.num_prefix_hits > 0
    assert any(pool.num_evictions for pool in engine.blocks.pools.values())
    for (rid, index), tokens in got.items():
        if rid in aborted:
            assert tokens == want[rid][:len(tokens)]
        else:
            assert tokens == want[rid], (rid, index)
    assert engine.blocks.num_sequences == 0
    assert all(pool.num_free == pool.num_blocks for pool in engine.blocks.pools.values())
