"""The request features of issue 17 in the engine on CPU against transformers (float32): penalties give the tokens of
a float64 reference loop over the reference model's logits, and mixed with pipelined requests each request gets
exactly its tokens alone (the pipelining rule); prompt log-probabilities equal transformers' within 1e-4 with
chunked prefill and preemption; n samples equal single requests seeded s + i; min_tokens holds the stop tokens
back."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest
import torch

from quickmoe.engine.sampling_params import SamplingParams, StructuredOutput
from quickmoe.llm import LLM

from .conftest import CPU_FLOAT32, GREEDY, load_hf_reference

CKPT_SEED = 17
ON = CPU_FLOAT32


@pytest.fixture(scope="module")
def llm(engine_model_dir):
    return LLM(engine_model_dir, **ON, max_model_len=256)


@pytest.fixture(scope="module")
def hf(engine_model_dir):
    return load_hf_reference(engine_model_dir)


def _prompts(n: int, lo: int, hi: int, rng: random.Random) -> list[list[int]]:
    return [[rng.randrange(1000) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


def _reference_greedy(hf, prompt: list[int], params: SamplingParams, steps: int) -> list[int]:
    """Greedy decoding with the penalties and bias applied to the reference model's float64 logits."""
    out: list[int] = []
    for _ in range(steps):
        with torch.no_grad():
            row = hf(torch.tensor([prompt + out])).logits[0, -1].double()
        for t, b in params.logit_bias:
            row[t] += b
        seen = torch.zeros_like(row, dtype=torch.bool)
        seen[prompt + out] = True
        r = params.repetition_penalty
        row = torch.where(seen, torch.where(row > 0, row / r, row * r), row)
        counts = Counter(out)
        for t, c in counts.items():
            row[t] -= params.frequency_penalty * c + params.presence_penalty
        out.append(int(row.argmax()))
    return out


def test_penalties_and_bias_give_the_float64_reference_tokens(llm, hf):
    rng = random.Random()
    prompts = _prompts(3, 4, 20, rng)
    cases = [SamplingParams(max_tokens=10, repetition_penalty=1.8, **GREEDY),
             SamplingParams(max_tokens=10, frequency_penalty=1.5, presence_penalty=0.5, **GREEDY),
             SamplingParams(max_tokens=10, logit_bias={rng.randrange(1000): 8.0, rng.randrange(1000): -5.0},
                            presence_penalty=-0.5, **GREEDY)]
    outs = llm.generate(prompts, cases)
    plain = llm.generate(prompts, SamplingParams(max_tokens=10, **GREEDY))
    for prompt, params, out, free in zip(prompts, cases, outs, plain):
        assert out.token_ids == _reference_greedy(hf, prompt, params, 10)
    assert any(o.token_ids != f.token_ids for o, f in zip(outs, plain))  # the penalties changed something
    # repetition_penalty is transformers' own definition too
    with torch.no_grad():
        # attention_mask given: without it transformers masks every prompt token equal to pad_token_id
        ids = torch.tensor([prompts[0]])
        ref = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=10, min_new_tokens=10,
                          do_sample=False, repetition_penalty=1.8, eos_token_id=None,
                          pad_token_id=0)[0, len(prompts[0]):].tolist()
    assert outs[0].token_ids == ref


def test_penalized_requests_mixed_with_pipelined_ones_get_their_tokens_alone(llm):
    """Penalized requests make the engine collect a step before launching the next (the pipelining rule); the
    others keep pipelining. Every request gets exactly what it gets alone, greedy and seeded."""
    rng = random.Random()
    prompts = _prompts(10, 1, 40, rng)
    params = []
    for i in range(10):
        extra = dict(repetition_penalty=1.5, frequency_penalty=0.3) if i % 3 == 0 else {}
        sampled = dict(temperature=0.9, seed=rng.randrange(10**6), ignore_eos=True) if i % 2 else GREEDY
        params.append(SamplingParams(max_tokens=rng.randint(3, 16), **extra, **sampled))
    together = llm.generate(prompts, params)
    alone = [llm.generate([p], sp)[0] for p, sp in zip(prompts, params)]
    assert [o.token_ids for o in together] == [o.token_ids for o in alone]
    assert all(len(o.token_ids) == sp.max_tokens for o, sp in zip(together, params))


@pytest.mark.parametrize("chunked", [False, True])
def test_prompt_logprobs_equal_transformers(engine_model_dir, llm, hf, chunked):
    rng = random.Random()
    prompts = _prompts(4, 40, 70, rng) if chunked else _prompts(4, 2, 70, rng)
    engine = LLM(engine_model_dir, **ON, max_model_len=128, num_kv_blocks=12, max_num_batched_tokens=16,
                 max_num_seqs=4) if chunked else llm
    outs = engine.generate(prompts, SamplingParams(max_tokens=24 if chunked else 1, prompt_logprobs=3, **GREEDY))
    if chunked:
        assert engine.engine.scheduler.num_preemptions > 0
    for prompt, out in zip(prompts, outs):
        with torch.no_grad():
            want = torch.log_softmax(hf(torch.tensor([prompt])).logits[0].double(), dim=-1)  # [L, V]
        got = out.prompt_logprobs
        assert len(got) == len(prompt) and got[0] is None
        for position, lp in enumerate(got[1:], start=1):
            expected = want[position - 1]
            assert lp.token_id == prompt[position]
            assert abs(lp.logprob - expected[prompt[position]].item()) < 1e-4
            tops = [t for t, _ in lp.top]
            top4 = expected.topk(4).values.tolist()
            if min(a - b for a, b in zip(top4, top4[1:])) > 1e-4:  # no near-tie: the exact top 3 in order
                assert tops == expected.topk(3).indices.tolist()
            else:  # float32 against float64 may order a near-tie either way: a top 3 up to the tolerance
                assert len(set(tops)) == 3 and all(expected[t].item() >= top4[2] - 1e-4 for t in tops)
            assert all(abs(v - expected[t].item()) < 1e-4 for t, v in lp.top)


def test_n_samples_are_the_requests_seeded_s_plus_i(llm):
    engine = llm.engine
    prompt = _prompts(1, 5, 30, random.Random())[0]
    seed = random.randrange(10**6)
    engine.add_request("n", prompt, SamplingParams(n=3, max_tokens=8, temperature=1.0, seed=seed, ignore_eos=True))
    got: dict[int, list[int]] = {0: [], 1: [], 2: []}
    finished = []
    while engine.has_unfinished():
        for out in engine.step():
            assert out.request_id == "n"
            got[out.index].extend(out.token_ids)
            if out.finished:
                finished.append(out.index)
    assert sorted(finished) == [0, 1, 2]
    for i in range(3):
        alone = llm.generate([prompt], SamplingParams(max_tokens=8, temperature=1.0, seed=seed + i, ignore_eos=True))
        assert got[i] == alone[0].token_ids
    assert len({tuple(v) for v in got.values()}) > 1
    assert engine.blocks.num_sequences == 0


def test_min_tokens_holds_the_stop_tokens_back(llm):
    rng = random.Random()
    prompt = _prompts(1, 5, 20, rng)[0]
    # ignore_eos: an EOS among the first tokens (random prompts, a tiny model) would end `free` before its third
    # token; the stop_token_ids still stop
    free = llm.generate([prompt], SamplingParams(max_tokens=12, temperature=0, ignore_eos=True))[0].token_ids
    stop = free[2]  # make the third output a stop token: it ends the request there
    ended = llm.generate([prompt], SamplingParams(max_tokens=12, temperature=0, stop_token_ids=[stop],
                                                  ignore_eos=True))[0]
    assert ended.finish_reason == "stop" and len(ended.token_ids) <= 3
    held = llm.generate([prompt], SamplingParams(max_tokens=12, temperature=0, stop_token_ids=[stop],
                                                 min_tokens=8, ignore_eos=True))[0]
    assert stop not in held.token_ids[:8] and len(held.token_ids) >= 8


def test_structured_requests_mixed_with_pipelined_ones_get_their_tokens_alone(llm):
    """Regex-constrained requests (their masks computed on the grammar thread once the previous token arrives)
    beside plain ones: each gets exactly its tokens alone, and the constrained text matches."""
    rng = random.Random()
    pattern = "[a-e]{2,4}( [0-9]{1,2}){1,3}"
    prompts = _prompts(8, 1, 30, rng)
    params = []
    for i in range(8):
        structured = StructuredOutput("regex", pattern) if i % 2 == 0 else None
        sampled = dict(temperature=0.8, seed=rng.randrange(10**6)) if i % 4 < 2 else dict(temperature=0)
        params.append(SamplingParams(max_tokens=24, structured=structured, **sampled))
    together = llm.generate(prompts, params)
    alone = [llm.generate([p], sp)[0] for p, sp in zip(prompts, params)]
    assert [o.token_ids for o in together] == [o.token_ids for o in alone]
    for out, sp in zip(together, params):
        if sp.structured is not None:
            assert re.fullmatch(pattern, out.text) and out.finish_reason == "stop", out.text


def test_structured_requests_do_not_hold_the_pipeline(llm, monkeypatch):
    """A constrained request's next step is launched while its previous token is still in flight (the mask job
    waits for it), and its tokens equal those of the same request with the pipeline held (collected first)."""
    engine_type = type(llm.engine)
    in_flight_at_launch: list[bool] = []
    launch = engine_type._launch

    def recording_launch(self, sched):
        in_flight_at_launch.append(self._in_flight is not None)
        return launch(self, sched)

    monkeypatch.setattr(engine_type, "_launch", recording_launch)
    rng = random.Random()
    prompt = _prompts(1, 3, 20, rng)[0]
    pattern = "[a-e]{3,5}( [0-9]{1,2}){2,3}"
    params = SamplingParams(max_tokens=20, temperature=0.9, seed=rng.randrange(10**6),
                            structured=StructuredOutput("regex", pattern))
    pipelined = llm.generate([prompt], params)[0]
    assert sum(in_flight_at_launch) >= len(pipelined.token_ids) - 1, in_flight_at_launch
    monkeypatch.setattr(engine_type, "_must_collect_first", lambda self: True)
    in_flight_at_launch.clear()
    held = llm.generate([prompt], params)[0]
    assert not any(in_flight_at_launch), in_flight_at_launch
    assert pipelined.token_ids == held.token_ids and re.fullmatch(pattern, pipelined.text), pipelined.text
