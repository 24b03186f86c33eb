"""The engine on CPU (a small random gpt-oss, window 16 so sliding layers release blocks): continuous
batching gives each request exactly its tokens alone; chunked prefill, preemption and batching change no
token; seeded sampling is reproducible whatever else runs; incremental outputs add up; stop strings cut
across token boundaries; logprobs are transformers'; aborts and random traffic leak no block."""

from __future__ import annotations

import logging
import os
import random
import time

import pytest
import torch

from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.errors import RequestError
from quickmoe.llm import LLM

from .conftest import load_hf_reference

CKPT = dict(layers=2, experts=4, hidden_size=64, intermediate_size=64, num_experts_per_tok=2, sliding_window=16,
            seed=11)
GREEDY = dict(temperature=0, ignore_eos=True)
# QUICKMOE_TEST_DEVICE=cuda runs the same equivalences on the GPU (Triton MoE and attention kernels), in float32 so
# that no near-tie of greedy tokens can flip with the batch shape's rounding
# (1 GiB of KV cache each: on a GPU the default takes most of its memory, and these tests keep several LLMs alive)
ON = dict(device=os.environ.get("QUICKMOE_TEST_DEVICE", "cpu"), dtype="float32", kv_cache_memory=1 << 30)


@pytest.fixture(scope="module")
def model_dir(ckpt_factory):
    return ckpt_factory(**CKPT)


@pytest.fixture(scope="module")
def llm(model_dir):
    return LLM(model_dir, **ON, max_model_len=256)


def _prompts(n: int, lo: int, hi: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(1000) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


def _tokens(outs) -> list[list[int]]:
    return [o.token_ids for o in outs]


def test_a_batch_of_32_gives_every_request_its_tokens_alone(llm):
    prompts = _prompts(32, 1, 60, seed=1)
    rng = random.Random(2)
    params = [SamplingParams(max_tokens=rng.randint(4, 24), **GREEDY) for _ in prompts]
    batched = llm.generate(prompts, params)
    alone = [llm.generate([p], sp)[0] for p, sp in zip(prompts, params)]
    assert _tokens(batched) == _tokens(alone)
    assert [len(o.token_ids) for o in batched] == [p.max_tokens for p in params]
    assert len({tuple(t) for t in _tokens(batched)}) > 16  # different prompts really give different tokens


def test_chunked_prefill_and_queueing_give_the_same_tokens(model_dir, llm):
    prompts = _prompts(6, 30, 90, seed=3)  # longer than the 16-token chunks and the window
    params = SamplingParams(max_tokens=12, **GREEDY)
    want = _tokens(llm.generate(prompts, params))
    chunked = LLM(model_dir, **ON, max_model_len=256, max_num_batched_tokens=16, max_num_seqs=3)
    assert _tokens(chunked.generate(prompts, params)) == want


def test_preemption_gives_the_same_tokens(model_dir, llm):
    prompts = _prompts(8, 20, 40, seed=4)
    params = SamplingParams(max_tokens=40, **GREEDY)
    want = _tokens(llm.generate(prompts, params))
    tight = LLM(model_dir, **ON, max_model_len=96, num_kv_blocks=8)  # 128 positions for 8 requests
    got = _tokens(tight.generate(prompts, params))
    assert tight.engine.scheduler.num_preemptions > 0
    assert got == want
    assert all(pool.num_free == pool.num_blocks for pool in tight.engine.blocks.pools.values())


def test_seeded_sampling_is_reproducible_whatever_the_batch(model_dir, llm):
    seeded = SamplingParams(max_tokens=20, temperature=0.9, top_p=0.9, top_k=50, seed=1234, ignore_eos=True)
    prompt = _prompts(1, 10, 10, seed=5)[0]
    alone = llm.generate([prompt], seeded)[0].token_ids
    others = _prompts(12, 1, 50, seed=6)
    rng = random.Random(7)
    other_params = [SamplingParams(max_tokens=rng.randint(1, 30), temperature=rng.choice([0, 0.5, 1.3]),
                                   top_k=rng.choice([0, 5]), seed=rng.choice([None, 3]), ignore_eos=True)
                    for _ in others]
    mixed = llm.generate(others[:6] + [prompt] + others[6:], other_params[:6] + [seeded] + other_params[6:])
    assert mixed[6].token_ids == alone
    tight = LLM(model_dir, **ON, max_model_len=96, num_kv_blocks=8, max_num_batched_tokens=16,
                max_num_seqs=4)  # chunked, queued and preempted
    assert tight.generate(others + [prompt], other_params + [seeded])[-1].token_ids == alone
    greedy = llm.generate([prompt], SamplingParams(max_tokens=20, **GREEDY))[0].token_ids
    other_seed = llm.generate([prompt], SamplingParams(max_tokens=20, temperature=0.9, seed=99, ignore_eos=True))
    assert alone != greedy or alone != other_seed[0].token_ids  # really sampled


def test_incremental_outputs_add_up_and_stop_strings_cut_across_tokens(llm):
    engine = llm.engine
    prompt = _prompts(1, 12, 12, seed=8)[0]
    full = llm.generate([prompt], SamplingParams(max_tokens=30, **GREEDY))[0]
    pieces = [llm.tokenizer.decode([t]) for t in full.token_ids]
    # a stop string spanning two tokens: the last character of one token's text and the first of the next
    boundary = next(i for i in range(1, len(pieces) - 1)
                    if pieces[i].isprintable() and pieces[i + 1].isprintable() and pieces[i] and pieces[i + 1]
                    and "\ufffd" not in pieces[i] + pieces[i + 1])
    stop = pieces[boundary][-1] + pieces[boundary + 1][0]
    engine.add_request("stop", prompt, SamplingParams(max_tokens=30, stop=[stop], **GREEDY))
    streamed, tokens, last = "", [], None
    while engine.has_unfinished():
        for out in engine.step():
            streamed += out.text
            tokens += out.token_ids
            last = out
    assert last.finished and last.finish_reason == "stop" and last.stop_reason == stop
    assert streamed == full.text[:full.text.index(stop)]
    assert tokens == full.token_ids[:len(tokens)] and len(tokens) <= boundary + 2


def test_logprobs_are_the_models_log_softmax(model_dir, llm):
    hf = load_hf_reference(model_dir)
    prompt = _prompts(1, 9, 9, seed=9)[0]
    out = llm.generate([prompt], SamplingParams(max_tokens=8, logprobs=3, **GREEDY))[0]
    with torch.no_grad():
        logits = hf(torch.tensor([prompt + out.token_ids])).logits[0].double()  # [L, V]
    want = torch.log_softmax(logits, dim=-1)[len(prompt) - 1:-1]  # [8, V]: the positions that chose them
    tol = 1e-4 if ON["device"] == "cpu" else 5e-3  # Triton's float32 dots run in TF32 on the GPU
    for step, (lp, token) in enumerate(zip(out.logprobs, out.token_ids)):
        assert lp.token_id == token and abs(lp.logprob - want[step, token].item()) < tol
        assert [t for t, _ in lp.top] == want[step].topk(3).indices.tolist()  # greedy: the chosen is top-1
        assert all(abs(v - want[step, t].item()) < tol for t, v in lp.top)


def test_abort_frees_blocks_and_ends_the_request(llm):
    engine = llm.engine
    engine.add_request("long", _prompts(1, 40, 40, seed=10)[0], SamplingParams(max_tokens=100, **GREEDY))
    engine.add_request("short", [5, 6], SamplingParams(max_tokens=3, **GREEDY))
    for _ in range(3):
        engine.step()
    assert engine.blocks.usage()["full"] > 0
    engine.abort("long")
    engine.abort("never-seen")  # ignored
    outs = engine.step()
    ended = [o for o in outs if o.request_id == "long"]
    assert len(ended) == 1 and ended[0].finished and ended[0].finish_reason == "abort"
    while engine.has_unfinished():
        engine.step()
    assert all(v == 0 for v in engine.blocks.usage().values())


@pytest.mark.parametrize("seed", range(3))
def test_random_traffic_with_aborts_never_leaks_blocks(model_dir, seed):
    llm = LLM(model_dir, **ON, max_model_len=128, num_kv_blocks=10, max_num_batched_tokens=24,
              max_num_seqs=4)
    engine, rng = llm.engine, random.Random(seed)
    live, finished = set(), {}
    for i in range(120):
        if rng.random() < 0.3:
            rid = f"r{i}"
            engine.add_request(rid, _prompts(1, 1, 60, seed=rng.randrange(10**6))[0],
                               SamplingParams(max_tokens=rng.randint(1, 40), temperature=rng.choice([0, 1.0])))
            live.add(rid)
        if live and rng.random() < 0.1:
            engine.abort(rng.choice(sorted(live)))
        for out in engine.step():
            if out.finished:
                finished[out.request_id] = out.finish_reason
                live.discard(out.request_id)
    while engine.has_unfinished():
        for out in engine.step():
            if out.finished:
                finished[out.request_id] = out.finish_reason
    assert set(finished.values()) <= {"stop", "length", "abort"} and "abort" in finished.values()
    assert engine.blocks.num_sequences == 0
    assert all(pool.num_free == pool.num_blocks for pool in engine.blocks.pools.values())


def test_bad_requests_are_refused_and_nothing_is_queued(llm):
    engine = llm.engine
    with pytest.raises(RequestError, match="already in use"):
        engine.add_request("dup", [1, 2], SamplingParams(max_tokens=50, **GREEDY))
        engine.add_request("dup", [1, 2], SamplingParams(max_tokens=1))
    engine.abort("dup")
    with pytest.raises(RequestError, match="prompt 0: token id 1024 is outside"):
        llm.generate([[1, 1024]])
    with pytest.raises(RequestError, match="expected a string or a list of integer token ids"):
        engine.add_request("x", [1, "a"], SamplingParams())
    while engine.has_unfinished():
        engine.step()
    assert engine.blocks.num_sequences == 0


@pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")  # Triton's interpreter
def test_paged_attention_kernels_in_the_model_match_the_reference(model_dir, llm):
    """The Triton paged-attention kernels (interpreter on CPU) inside the model, with chunked prefill over
    cached context and decodes in one step: the reference's greedy tokens, whichever cache layout each uses (the
    reference's the default head-major, the kernels' slot-major)."""
    pytest.importorskip("triton")
    prompts = _prompts(3, 5, 40, seed=12)
    params = SamplingParams(max_tokens=6, **GREEDY)
    want = _tokens(llm.generate(prompts, params))
    kernels = LLM(model_dir, **ON, max_model_len=128, attention_kernels="triton", max_num_batched_tokens=24,
                  kv_cache_layout="slot-major")
    assert not kernels.runner.kv_cache.head_major and llm.runner.kv_cache.head_major
    assert _tokens(kernels.generate(prompts, params)) == want


@pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")  # Triton's interpreter
def test_the_fast_paths_give_the_reference_tokens(model_dir):
    """The Triton kernels (attention, RoPE + KV write, norms, routing, experts), the decode graphs' padded
    static-buffer path (captured on CUDA, run eagerly on CPU) and the pipelined engine (a step launched before
    the previous one's tokens reach the host) give exactly the greedy tokens of the torch reference path with
    no graphs: batched, with chunked prefill, preemption, and requests aborted while steps are in flight (the
    reference with a slot-major cache, the fast paths with the default head-major one)."""
    pytest.importorskip("triton")
    from quickmoe.executor.cuda_graphs import DecodeGraphs, decode_buckets

    prompts = _prompts(6, 3, 40, seed=21)
    rng = random.Random(22)
    params = [SamplingParams(max_tokens=rng.randint(3, 8), **GREEDY) for _ in prompts]
    common = dict(max_model_len=96, num_kv_blocks=8, max_num_batched_tokens=24, max_num_seqs=6)
    reference = LLM(model_dir, **ON, **common, attention_kernels="torch", moe_kernels="torch", cuda_graphs="off",
                    kv_cache_layout="slot-major")
    want = _tokens(reference.generate(prompts, params))
    assert reference.engine.scheduler.num_preemptions > 0
    fast = LLM(model_dir, **ON, **common, attention_kernels="triton", moe_kernels="triton")
    if fast.runner.graphs is None:  # CPU: the graphs' padded static-buffer path, run eagerly
        fast.runner.graphs = DecodeGraphs(fast.runner, decode_buckets(6), capture=False)
    assert _tokens(fast.generate(prompts, params)) == want
    assert fast.engine.scheduler.num_preemptions > 0

    engine = fast.engine  # aborts while a step is in flight: the others keep their tokens, no block leaks
    kept = 4  # of the prompts (the interpreter's time; a row's tokens do not depend on its batch)
    for i, (p, sp) in enumerate(zip(prompts[:kept], params)):
        engine.add_request(f"r{i}", p, sp)
    got: dict[str, list[int]] = {f"r{i}": [] for i in range(kept)}
    for step in range(40):
        if step == 4:
            engine.abort("r1")
            engine.abort("r3")
        for out in engine.step():
            got[out.request_id].extend(out.token_ids)
        if not engine.has_unfinished():
            break
    engine.step()  # the last step in flight
    assert all(got[f"r{i}"] == want[i] for i in range(kept) if i not in (1, 3))
    assert all(got[f"r{i}"] == want[i][:len(got[f"r{i}"])] for i in (1, 3))
    assert any(len(got[f"r{i}"]) < len(want[i]) for i in (1, 3))  # the aborts cut a request short
    assert engine.blocks.num_sequences == 0


@pytest.mark.parametrize("temperature", [1e-300, 1e-40, 1e-7])
def test_a_tiny_temperature_gives_the_greedy_tokens(llm, temperature):
    """Temperatures below the greedy threshold (1e-5) are greedy: never token 0 repeated from a NaN row."""
    prompts = _prompts(3, 4, 20, seed=41)
    greedy = llm.generate(prompts, SamplingParams(max_tokens=8, **GREEDY))
    tiny = llm.generate(prompts, SamplingParams(max_tokens=8, temperature=temperature, ignore_eos=True, seed=3))
    assert _tokens(tiny) == _tokens(greedy)
    assert any(t != 0 for toks in _tokens(tiny) for t in toks)


def test_a_step_slow_to_queue_on_a_gpu_is_logged_with_its_size(llm, monkeypatch, caplog):
    """A step whose launch took long (a kernel compiled at first use) stalls every request: the engine says so,
    naming the step's tokens and sequences; on a CPU, where queueing a step is running it, it does not."""
    from quickmoe.engine import engine as engine_module

    runner = llm.engine.runner
    execute = runner.execute

    def slow_execute(*args, **kwargs):
        time.sleep(0.03)
        return execute(*args, **kwargs)

    monkeypatch.setattr(runner, "execute", slow_execute)
    monkeypatch.setattr(engine_module, "SLOW_LAUNCH_S", 0.02)
    prompt = _prompts(1, 7, 7, seed=21)[0]
    assert engine_module.queues_asynchronously(torch.device("cpu")) is False
    monkeypatch.setattr(engine_module, "queues_asynchronously", lambda device: False)  # a CPU (on any test device)
    with caplog.at_level(logging.WARNING, logger="quickmoe.engine.engine"):
        llm.generate([prompt], SamplingParams(max_tokens=2, **GREEDY))
    assert not [r for r in caplog.records if "to queue on the host" in r.getMessage()]  # a CPU runs its steps
    monkeypatch.setattr(engine_module, "queues_asynchronously", lambda device: True)
    with caplog.at_level(logging.WARNING, logger="quickmoe.engine.engine"):
        llm.generate([prompt], SamplingParams(max_tokens=2, **GREEDY))
    slow = [r.getMessage() for r in caplog.records if "to queue on the host" in r.getMessage()]
    assert slow and "a step of 7 tokens over 1 sequences" in slow[0]
