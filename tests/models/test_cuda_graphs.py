"""Decode CUDA graphs (executor/cuda_graphs.py). On CPU the padded static-buffer path runs eagerly (capture off):
padding rows (no slot, no context) change no token and no cache entry of the real sequences. On the GPU: greedy
tokens identical between eager, compiled and CUDA-graph decode; the capture phase is reported."""

from __future__ import annotations

import random

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


def test_buckets_are_powers_of_two_up_to_max_num_seqs():
    assert decode_buckets(1) == (1,)
    assert decode_buckets(64) == (1, 2, 4, 8, 16, 32, 64)
    assert decode_buckets(48) == (1, 2, 4, 8, 16, 32, 48)
    assert decode_buckets(1000) == (1, 2, 4, 8, 16, 32, 64, 128, 256)


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
