"""Decode CUDA graphs (executor/cuda_graphs.py). On CPU the padded static-buffer path runs eagerly (capture off):
padding rows (no slot, no context) change no token and no cache entry of the real sequences. On the GPU: greedy
tokens identical between eager, compiled and CUDA-graph decode; the capture phase is reported."""

from __future__ import annotations

import random
import time

import pytest
import torch

from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.errors import ConfigError
from quickmoe.executor.cuda_graphs import DecodeGraphs, decode_buckets
from quickmoe.llm import LLM

CKPT = dict(layers=2, experts=4, hidden_size=64, intermediate_size=64, num_experts_per_tok=2, sliding_window=16,
            seed=41)


def _prompts(n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(1000) for _ in range(rng.randint(1, 40))] for _ in range(n)]


def test_buckets_cover_every_batch_with_little_padding():
    assert decode_buckets(1) == (1,)
    assert decode_buckets(64) == (1, 2, 4, 8, 16, 32, 48, 64)
    assert decode_buckets(40) == (1, 2, 4, 8, 16, 32, 40)
    assert decode_buckets(256) == (1, 2, 4, 8, 16, 32, *range(48, 257, 16))
    assert decode_buckets(300) == (1, 2, 4, 8, 16, 32, *range(48, 257, 16), 288, 300)
    for max_num_seqs in (1, 7, 100, 256, 512, 1000):
        buckets = decode_buckets(max_num_seqs)
        assert buckets[-1] == max_num_seqs and list(buckets) == sorted(set(buckets))
        for batch in range(1, max_num_seqs + 1):  # every batch the scheduler can form has a graph
            bucket = next(b for b in buckets if b >= batch)
            # at most 2x padding below 32 (powers of two), then at most 15 rows up to 256 and 31 beyond
            assert bucket - batch <= (batch if bucket <= 32 else 15 if bucket <= 256 else 31), (batch, bucket)
    # the engine option's sizes, max_num_seqs always among them
    assert decode_buckets(64, (1, 3, 64)) == (1, 3, 64)
    assert decode_buckets(64, (2, 8)) == (2, 8, 64)


def test_padded_decode_path_gives_the_eager_tokens(ckpt_factory):
    model_dir = ckpt_factory(**CKPT)
    prompts = _prompts(7, seed=1)  # decode batches of 7, then fewer as requests end: buckets 8, 4, 2, 1
    params = [SamplingParams(max_tokens=n, temperature=0, ignore_eos=True) for n in (12, 3, 30, 5, 20, 8, 16)]
    eager = LLM(model_dir, device="cpu", max_model_len=128)
    want = [o.token_ids for o in eager.generate(prompts, params)]
    padded = LLM(model_dir, device="cpu", max_model_len=128)
    graphs = DecodeGraphs(padded.runner, decode_buckets(8), capture=False)
    padded.runner.graphs = graphs
    calls = []
    run = graphs.run
    graphs.run = lambda tokens, prev, host: calls.append((len(tokens), sum(r >= 0 for r in prev))) or run(
        tokens, prev, host)
    assert [o.token_ids for o in padded.generate(prompts, params)] == want
    assert {graphs.bucket(n) for n, _ in calls} >= {8, 4, 1} and any(graphs.bucket(n) != n for n, _ in calls)
    # every decode after the first takes its input tokens from the previous step's samples on the device
    assert all(pending == n for n, pending in calls)
    assert graphs.meta.shape[1] == 8 and graphs.block_tables.shape[1:] == (8, 128 // 16)
    # every bucket's logits are rows of the one shared buffer (a replay's are sampled before the next replay)
    assert len(graphs.outputs) >= 3
    assert all(out.data_ptr() == graphs.logits.data_ptr() for out in graphs.outputs.values())


@pytest.mark.parametrize("preset,kernels", [("gpt-oss", "torch"), ("gpt-oss", "triton"), ("qwen3", "torch")])
def test_padding_rows_of_a_decode_bucket_go_to_no_expert(ckpt_factory, monkeypatch, preset, kernels):
    """A padded bucket's MoE blocks route the rows at and past the step's batch size to id E with weight 0, and
    only them; poisoned with NaN after every MoE block, those rows change no token of the real sequences. Bucket 1
    (never padded) routes as the eager step does. kernels "triton": the routing and MoE kernels (the interpreter
    on CPU; on a GPU in float32, where the MoE tiles follow the bucket's size: 95% of the tokens)."""
    from quickmoe.layers.moe import FusedMoE

    if kernels == "triton":
        pytest.importorskip("triton")
    on_gpu = kernels == "triton" and torch.cuda.is_available()
    device = dict(device="cuda", dtype="float32", kv_cache_memory=64 << 20, cuda_graphs="off") if on_gpu else \
        dict(device="cpu")
    kw = dict(CKPT) if preset == "gpt-oss" else dict(preset="qwen3-moe-tiny", experts_dtype=None, layers=2,
                                                     experts=4, seed=47)
    model_dir = ckpt_factory(**kw)
    prompts = _prompts(5, seed=3)  # decode batches of 5 (bucket 8), then 3 (4), 2, 1 as requests end
    params = [SamplingParams(max_tokens=n, temperature=0, ignore_eos=True) for n in (9, 4, 14, 6, 11)]
    want = [o.token_ids for o in LLM(model_dir, max_model_len=128, moe_kernels=kernels, **device).generate(
        prompts, params)]
    padded = LLM(model_dir, max_model_len=128, moe_kernels=kernels, **device)
    graphs = DecodeGraphs(padded.runner, decode_buckets(8), capture=False)
    graphs.capture_startup()  # the warm-ups (every row padding) before the MoE blocks are watched
    padded.runner.graphs = graphs
    batches, seen = [], []
    run, forward = graphs.run, FusedMoE.forward
    graphs.run = lambda tokens, prev, host: batches.append(len(tokens)) or run(tokens, prev, host)

    def poisoned(self, hidden, topk_weights, topk_ids, combine=True, hidden_fp8=None, padding_rows=False):
        out = forward(self, hidden, topk_weights, topk_ids, combine, hidden_fp8, padding_rows)
        absent = (topk_ids == self.num_experts).all(-1)  # [T]
        seen.append((topk_weights.clone(), topk_ids.clone(), padding_rows, self.num_experts))
        return out.masked_fill(absent.view(-1, *[1] * (out.dim() - 1)), float("nan")) if padding_rows else out

    monkeypatch.setattr(FusedMoE, "forward", poisoned)
    got = [o.token_ids for o in padded.generate(prompts, params)]
    if on_gpu:
        assert sum(a == b for x, y in zip(got, want) for a, b in zip(x, y)) >= 0.95 * sum(map(len, want))
    else:
        assert got == want
    layers = sum(isinstance(m, FusedMoE) for m in padded.runner.model.modules())
    padded_steps = [b for b in batches if graphs.bucket(b) > 1]
    assert {graphs.bucket(b) for b in batches} >= {8, 4, 1} and any(graphs.bucket(b) != b for b in batches)
    calls = [c for c in seen if c[2]]  # the MoE calls of padded buckets (bucket 1 and prompt steps pass none)
    assert len(calls) == layers * len(padded_steps) and layers >= 1
    for step, batch in enumerate(padded_steps):
        for weights, ids, _, num_experts in calls[step * layers:(step + 1) * layers]:
            assert ids.shape[0] == graphs.bucket(batch)
            assert (ids[batch:] == num_experts).all() and (weights[batch:] == 0).all()
            assert (ids[:batch] < num_experts).all() and (ids[:batch] >= 0).all()


def _lazy_graphs(llm: LLM, max_batch: int, startup_max: int) -> DecodeGraphs:
    """The padded path (capture off) with the start-up buckets "captured" (warmed up) and the rest left for later."""
    graphs = DecodeGraphs(llm.runner, decode_buckets(max_batch), capture=False, startup_max=startup_max)
    graphs.capture_startup()
    llm.runner.graphs = graphs
    return graphs


# 12 requests decoding together (bucket 16), then fewer as they end (8, 4, 2, 1)
LAZY_MAX_TOKENS = (30, 3, 25, 8, 20, 5, 28, 12, 16, 4, 22, 10)


def test_buckets_left_for_later_are_captured_once_when_a_step_needs_them_and_tokens_are_unchanged(ckpt_factory):
    """Start-up captures buckets 1, 2, 4 only; the first step of 9-16 sequences captures 16 and the first of 5-8
    captures 8 (on the previous steps' stale inputs: the capture must reset them to padding first, or its warm-up
    overwrites cache entries of running sequences); later steps replay them; greedy tokens equal eager ones."""
    model_dir = ckpt_factory(**CKPT)
    prompts = _prompts(len(LAZY_MAX_TOKENS), seed=2)
    params = [SamplingParams(max_tokens=n, temperature=0, ignore_eos=True) for n in LAZY_MAX_TOKENS]
    want = [o.token_ids for o in LLM(model_dir, device="cpu", max_model_len=128).generate(prompts, params)]
    llm = LLM(model_dir, device="cpu", max_model_len=128, max_num_seqs=16)
    graphs = _lazy_graphs(llm, 16, startup_max=4)
    assert graphs.info["startup_batch_sizes"] == [1, 2, 4] and graphs.info["deferred"] == [8, 16]
    assert [c["batch_size"] for c in graphs.info["captures"]] == [4, 2, 1]
    assert [o.token_ids for o in llm.generate(prompts, params)] == want
    later = [(c["batch_size"], c["when"]) for c in graphs.info["captures"][3:]]
    assert later == [(16, "step"), (8, "step")] and graphs.info["deferred"] == []
    assert graphs.replays[16] > 1 and graphs.replays[8] > 1 and graphs.replays[1] > 1


def test_an_idle_server_captures_the_buckets_left_for_later(ckpt_factory):
    """AsyncEngine, idle for IDLE_WORK_DELAY_S, runs the engine's idle work: every deferred bucket is captured
    (smallest first) before any request; a request afterwards replays them and gets the eager tokens."""
    import asyncio

    from quickmoe.server.async_engine import IDLE_WORK_DELAY_S, AsyncEngine

    model_dir = ckpt_factory(**CKPT)
    prompts = _prompts(6, seed=4)
    params = SamplingParams(max_tokens=6, temperature=0, ignore_eos=True)
    want = [o.token_ids for o in LLM(model_dir, device="cpu", max_model_len=128).generate(prompts, params)]
    llm = LLM(model_dir, device="cpu", max_model_len=128, max_num_seqs=8)
    graphs = _lazy_graphs(llm, 8, startup_max=2)

    async def serve() -> list[list[int]]:
        engine = AsyncEngine(llm.engine, max_waiting=8)
        engine.start()
        for _ in range(200):
            if not graphs.info["deferred"]:
                break
            await asyncio.sleep(0.05)
        streams = [engine.add_request(f"r{i}", p, params) for i, p in enumerate(prompts)]
        outs = []
        for stream in streams:
            outs.append([t async for timed in stream for t in timed.output.token_ids])
        await engine.shutdown()
        return outs

    t0 = time.monotonic()
    assert asyncio.run(serve()) == want
    idle = [c for c in graphs.info["captures"] if c["when"] == "idle"]
    assert [c["batch_size"] for c in idle] == [4, 8] and time.monotonic() - t0 >= IDLE_WORK_DELAY_S
    assert graphs.replays[8] >= 1  # 6 sequences decode in the bucket captured while idle


def test_cuda_graphs_on_cpu_is_refused(ckpt_factory):
    with pytest.raises(ConfigError, match="'cuda_graphs' = 'on' needs a CUDA device"):
        LLM(ckpt_factory(**CKPT), device="cpu", cuda_graphs="on")


@pytest.mark.gpu
def test_graph_and_compiled_decode_equal_eager_on_the_gpu(ckpt_factory, tmp_path, monkeypatch):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    monkeypatch.setenv("QUICKMOE_COMPILE_CACHE_DIR", str(tmp_path / "compile"))
    model_dir = ckpt_factory(layers=4, seed=43)
    prompts = _prompts(5, seed=3)
    params = SamplingParams(max_tokens=24, temperature=0, ignore_eos=True)
    gpu = dict(device="cuda", dtype="bfloat16", kv_cache_memory=1 << 30)  # several LLMs alive at once
    eager = [o.token_ids for o in LLM(model_dir, cuda_graphs="off", **gpu).generate(prompts, params)]
    graphs = LLM(model_dir, cuda_graphs="on", max_num_seqs=8, **gpu)
    assert [o.token_ids for o in graphs.generate(prompts, params)] == eager
    info = graphs.startup_report.info["cuda_graphs"]
    assert info["batch_sizes"] == [1, 2, 4, 8] and graphs.startup_report.phases["capture"] > 0
    torch._dynamo.reset()
    both = LLM(model_dir, cuda_graphs="on", compile="on", max_num_seqs=8, **gpu)
    assert [o.token_ids for o in both.generate(prompts, params)] == eager


@pytest.mark.gpu
def test_start_up_captures_only_the_startup_buckets_and_graph_decode_equals_eager_on_the_gpu(ckpt_factory):
    """The serving defaults on CUDA: start-up captures buckets 1, 2, 4, 8 only (the capture phase covers them); 20
    requests decoding together capture 32, then 16 as they end, each when a step first needs it; greedy tokens
    equal eager decode."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    model_dir = ckpt_factory(layers=4, seed=43)
    prompts = _prompts(20, seed=5)
    params = [SamplingParams(max_tokens=8 + 2 * i, temperature=0, ignore_eos=True) for i in range(20)]
    gpu = dict(device="cuda", dtype="bfloat16", kv_cache_memory=1 << 30)
    eager = [o.token_ids for o in LLM(model_dir, cuda_graphs="off", **gpu).generate(prompts, params)]
    llm = LLM(model_dir, max_num_seqs=32, **gpu)  # cuda_graphs "auto": on CUDA
    info = llm.startup_report.info["cuda_graphs"]
    assert info["batch_sizes"] == [1, 2, 4, 8, 16, 32] and info["startup_batch_sizes"] == [1, 2, 4, 8]
    assert [(c["batch_size"], c["when"]) for c in info["captures"]] == [(8, "startup"), (4, "startup"),
                                                                        (2, "startup"), (1, "startup")]
    assert llm.startup_report.phases["capture"] >= info["seconds"] > 0 and info["deferred"] == [16, 32]
    assert [o.token_ids for o in llm.generate(prompts, params)] == eager
    assert [(c["batch_size"], c["when"]) for c in info["captures"][4:]] == [(32, "step"), (16, "step")]
    assert all(llm.runner.graphs.replays[b] >= 1 for b in (1, 2, 4, 8, 16, 32))
