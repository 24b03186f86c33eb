"""A capture's eager warm-up over the layer prefix (executor/capture_warmup.py; `QUICKMOE_CAPTURE_WARMUP=prefix`,
off by default until measured on the GPU), on CPU with capture off (the "capture" is the eager stand-in, so the
warm-up is the only forward a capture runs here): the warm-up runs the prefix that holds every (kind, kind before)
pair, a replay every layer; a capture that fails after a prefix warm-up is retried once after a warm-up over every
layer; out of memory is never retried; the default and compiled layers warm up over every layer. The padded path
stays exact with the prefix warm-up on a model deeper than its prefix."""

from __future__ import annotations

import logging
import random

import pytest
import torch

from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.errors import ConfigError
from quickmoe.executor.cuda_graphs import DecodeGraphs, decode_buckets
from quickmoe.executor.dry_layers import layer_prefix
from quickmoe.executor.prefill_graphs import PrefillGraphs, prefill_seq_buckets, prefill_token_buckets
from quickmoe.llm import LLM

# six layers, sliding and full in turn: the prefix holding every (kind, kind before) pair is 3 layers
CKPT = dict(layers=6, experts=4, hidden_size=64, intermediate_size=64, num_experts_per_tok=2, sliding_window=16,
            seed=43)
CAPTURE_FAILED = "Triton Error [CUDA]: operation not permitted when stream is capturing"


def _counting(llm: LLM) -> list[int]:
    """Calls of each decoder layer, counted by forward pre-hooks."""
    calls = [0] * len(llm.runner.model.model.layers)
    for idx, layer in enumerate(llm.runner.model.model.layers):
        layer.register_forward_pre_hook(lambda module, args, idx=idx: calls.__setitem__(idx, calls[idx] + 1))
    return calls


@pytest.fixture
def llm(ckpt_factory, monkeypatch):
    monkeypatch.setenv("QUICKMOE_CAPTURE_WARMUP", "prefix")
    llm = LLM(ckpt_factory(**CKPT), device="cpu", max_model_len=128)
    assert layer_prefix(llm.runner.model.model.layers, llm.runner.kv_cache.layer_group) == 3
    return llm


def test_the_decode_warm_up_runs_the_prefix_and_the_replay_every_layer(llm):
    calls = _counting(llm)
    graphs = DecodeGraphs(llm.runner, decode_buckets(4), capture=False)
    graphs._capture(4, "idle")
    assert calls == [1, 1, 1, 0, 0, 0]
    record = graphs.info["captures"][-1]
    assert record["warmup_layers"] == 3 and "prefix_retry" not in record and record["warmup_s"] > 0
    assert len(llm.runner.model.model.layers) == 6  # the layers are back after the warm-up
    with torch.inference_mode():  # as the engine's steps run
        graphs.graphs[4].replay()
    assert calls == [2, 2, 2, 1, 1, 1]


def test_a_capture_failing_after_the_prefix_warm_up_is_retried_after_a_whole_one(llm, monkeypatch, caplog):
    calls = _counting(llm)
    graphs = DecodeGraphs(llm.runner, decode_buckets(4), capture=False)
    record = graphs._record
    attempts = []

    def fails_once(size):
        attempts.append(list(calls))
        if len(attempts) == 1:
            raise RuntimeError(CAPTURE_FAILED)
        return record(size)

    monkeypatch.setattr(graphs, "_record", fails_once)
    with caplog.at_level(logging.WARNING, logger="quickmoe.executor.capture_warmup"):
        graphs._capture(2, "step")
    # the first capture after the prefix's warm-up, the second after every layer's
    assert attempts == [[1, 1, 1, 0, 0, 0], [2, 2, 2, 1, 1, 1]]
    info = graphs.info["captures"][-1]
    assert info["warmup_layers"] == 6 and info["prefix_retry"] == CAPTURE_FAILED and "failed" not in info
    assert any("over 3 of the 6 decoder layers failed" in r.getMessage() for r in caplog.records)
    assert 2 in graphs.graphs


def test_a_second_failure_is_raised_and_out_of_memory_is_not_retried(llm, monkeypatch):
    graphs = DecodeGraphs(llm.runner, decode_buckets(4), capture=False)
    attempts = []

    def always_fails(size):
        attempts.append(size)
        raise RuntimeError(CAPTURE_FAILED)

    monkeypatch.setattr(graphs, "_record", always_fails)
    with pytest.raises(RuntimeError, match="not permitted"):
        graphs._capture(4, "startup")
    assert attempts == [4, 4]

    def out_of_memory(size):
        attempts.append(size)
        raise torch.OutOfMemoryError("CUDA out of memory")

    attempts.clear()
    monkeypatch.setattr(graphs, "_record", out_of_memory)
    graphs._capture(2, "idle")  # a later bucket without memory runs eagerly
    assert attempts == [2] and graphs.info["captures"][-1]["failed"] == "out of memory"


def test_the_default_warms_up_over_every_layer_and_a_bad_switch_is_refused(llm, monkeypatch):
    calls = _counting(llm)
    monkeypatch.delenv("QUICKMOE_CAPTURE_WARMUP")
    graphs = DecodeGraphs(llm.runner, decode_buckets(2), capture=False)
    graphs._capture(2, "startup")
    assert calls == [1] * 6 and graphs.info["captures"][-1]["warmup_layers"] == 6
    monkeypatch.setenv("QUICKMOE_CAPTURE_WARMUP", "layers")
    with pytest.raises(ConfigError, match="QUICKMOE_CAPTURE_WARMUP='layers': expected 'all'.* or 'prefix'"):
        graphs._capture(1, "startup")


def test_compiled_layers_warm_up_over_every_layer(llm, monkeypatch):
    calls = _counting(llm)
    monkeypatch.setattr(llm.runner, "layers_compiled", True)
    graphs = DecodeGraphs(llm.runner, decode_buckets(1), capture=False)
    graphs._capture(1, "startup")
    assert calls == [1] * 6 and graphs.info["captures"][-1]["warmup_layers"] == 6


def test_the_prompt_step_warm_up_runs_the_prefix_and_retries_after_a_failure(llm, monkeypatch):
    calls = _counting(llm)
    graphs = PrefillGraphs(llm.runner, prefill_token_buckets(64), prefill_seq_buckets(4), capture=False)
    graphs._capture((64, 1))
    assert calls == [1, 1, 1, 0, 0, 0] and graphs.info["captures"][-1]["warmup_layers"] == 3
    record = graphs._record
    monkeypatch.setattr(graphs, "_record", lambda key: (_ for _ in ()).throw(RuntimeError(CAPTURE_FAILED))
                        if calls[5] == 0 else record(key))
    graphs._capture((64, 4))  # fails after the prefix (layer 5 not run yet), then succeeds after every layer
    info = graphs.info["captures"][-1]
    assert calls == [3, 3, 3, 1, 1, 1] and info["warmup_layers"] == 6 and info["prefix_retry"] == CAPTURE_FAILED
    assert (64, 4) in graphs.graphs and not graphs.failed


def test_the_padded_decode_path_with_prefix_warm_ups_gives_the_eager_tokens(ckpt_factory, monkeypatch):
    """Warm-ups over the prefix write no cache entry and leave every layer in place: a model of six layers decodes
    the eager path's tokens through buckets captured along the way (8, 4, 2, 1)."""
    monkeypatch.setenv("QUICKMOE_CAPTURE_WARMUP", "prefix")
    model_dir = ckpt_factory(**CKPT)
    rng = random.Random(5)
    prompts = [[rng.randrange(1000) for _ in range(rng.randint(1, 30))] for _ in range(6)]
    params = [SamplingParams(max_tokens=n, temperature=0, ignore_eos=True) for n in (9, 2, 17, 4, 12, 6)]
    want = [o.token_ids for o in LLM(model_dir, device="cpu", max_model_len=128).generate(prompts, params)]
    padded = LLM(model_dir, device="cpu", max_model_len=128)
    padded.runner.graphs = graphs = DecodeGraphs(padded.runner, decode_buckets(8), capture=False)
    assert [o.token_ids for o in padded.generate(prompts, params)] == want
    assert {c["warmup_layers"] for c in graphs.info["captures"]} == {3} and len(graphs.info["captures"]) >= 3


@pytest.mark.gpu
def test_prefix_warm_ups_capture_every_bucket_on_the_gpu_and_decode_the_eager_tokens(ckpt_factory, monkeypatch):
    """On CUDA, real captures after warm-ups over 3 of 6 layers: none needs the retry (the prefix launched every
    kernel variant the whole step launches), the idle work's prompt graphs too, and greedy tokens equal eager."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    monkeypatch.setenv("QUICKMOE_CAPTURE_WARMUP", "prefix")
    model_dir = ckpt_factory(**CKPT)
    rng = random.Random(7)
    prompts = [[rng.randrange(1000) for _ in range(rng.randint(1, 60))] for _ in range(12)]
    params = [SamplingParams(max_tokens=6 + 2 * i, temperature=0, ignore_eos=True) for i in range(12)]
    gpu = dict(device="cuda", dtype="bfloat16", kv_cache_memory=1 << 30)
    eager = [o.token_ids for o in LLM(model_dir, cuda_graphs="off", **gpu).generate(prompts, params)]
    llm = LLM(model_dir, max_num_seqs=16, **gpu)
    llm.engine.finish_idle_work()  # every deferred bucket, decode and prompt graphs
    assert [o.token_ids for o in llm.generate(prompts, params)] == eager
    captures = llm.runner.graphs.info["captures"] + llm.runner.prefill_graphs.info["captures"]
    assert len(captures) > 6 and all("failed" not in c and "prefix_retry" not in c for c in captures), captures
    assert {c["warmup_layers"] for c in captures} == {3}
