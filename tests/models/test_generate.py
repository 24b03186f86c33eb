"""LLM.generate and the generate command: request validation, stopping, seeded sampling, the default model."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.errors import RequestError
from quickmoe.llm import LLM


@pytest.fixture(scope="module")
def llm(ckpt_factory):
    return LLM(ckpt_factory(hidden_size=64, intermediate_size=64), device="cpu", max_model_len=64)


def test_bad_prompts_raise_request_error_naming_the_problem(llm):
    with pytest.raises(RequestError, match="prompt 1: empty"):
        llm.generate([[1, 2], []])
    with pytest.raises(RequestError, match="token id 5000 is outside"):
        llm.generate([[1, 5000]])
    with pytest.raises(RequestError, match="64 tokens leave no room"):
        llm.generate([[1] * 64])
    with pytest.raises(RequestError, match="2 SamplingParams for 1 prompts"):
        llm.generate([[1, 2]], [SamplingParams(), SamplingParams()])


def test_stops_at_stop_token_max_tokens_and_model_length(llm):
    greedy = SamplingParams(max_tokens=10, temperature=0, ignore_eos=True)
    (out,) = llm.generate([[3, 4, 5]], greedy)
    assert len(out.token_ids) == 10 and out.finish_reason == "length"
    stop_at = out.token_ids[4]
    first = out.token_ids.index(stop_at)
    stop_params = SamplingParams(max_tokens=10, temperature=0, stop_token_ids=[stop_at], ignore_eos=True)
    (stopped,) = llm.generate([[3, 4, 5]], stop_params)
    assert stopped.token_ids == out.token_ids[:first + 1] and stopped.finish_reason == "stop"
    (long,) = llm.generate([[7] * 60], SamplingParams(max_tokens=50, temperature=0, ignore_eos=True))
    assert len(long.token_ids) == 4 and long.finish_reason == "length"  # capped by max_model_len=64


def test_eos_ids_stop_generation_unless_ignored(llm):
    eos = llm.config.eos_token_ids[0]
    assert eos in llm.engine.eos_ids
    assert set(llm.tokenizer.eos_token_ids) <= llm.engine.eos_ids  # generation_config's ids too
    prompt = [3, 4, 5]
    free = llm.generate([prompt], SamplingParams(max_tokens=6, temperature=0, ignore_eos=True))[0]
    first = free.token_ids[0]
    # the model's first greedy token made an EOS id (a stop token id behaves the same): generation stops
    stopped = llm.generate([prompt], SamplingParams(max_tokens=6, temperature=0, stop_token_ids=[first]))[0]
    assert stopped.token_ids == [first] and stopped.finish_reason == "stop" and stopped.stop_reason == first
    assert stopped.text == ""  # the stop token's text is not part of the output


def test_seeded_sampling_same_alone_and_in_a_batch(llm):
    p = SamplingParams(max_tokens=12, temperature=1.0, top_p=0.95, seed=42, ignore_eos=True)
    (alone,) = llm.generate([[9, 8, 7]], p)
    batch = llm.generate([[1, 2, 3, 4], [9, 8, 7], [5]], [SamplingParams(max_tokens=5, seed=1), p,
                                                         SamplingParams(max_tokens=20, temperature=0.5)])
    assert batch[1].token_ids == alone.token_ids
    greedy = llm.generate([[9, 8, 7]], SamplingParams(max_tokens=12, temperature=0, ignore_eos=True))[0]
    other_seed = llm.generate([[9, 8, 7]], SamplingParams(max_tokens=12, seed=43, ignore_eos=True))[0]
    assert alone.token_ids != greedy.token_ids or alone.token_ids != other_seed.token_ids  # really sampled


def test_generate_cli_on_the_embedded_default(tmp_path):
    """The README's main job: no DIR runs the embedded trained model (shipped in the package) on CPU."""
    env = dict(os.environ, QUICKMOE_CACHE_DIR=str(tmp_path / "cache"))
    cmd = [sys.executable, "-m", "quickmoe", "generate", "--prompt", "Hello", "--max-tokens", "8", "--seed", "0",
           "--device", "cpu", "--json"]
    t0 = time.perf_counter()
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert first.returncode == 0, first.stderr
    t_first = time.perf_counter() - t0
    second = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert second.returncode == 0, second.stderr
    assert first.stdout == second.stdout  # same seed, same default model, same tokens
    assert "random weights" not in first.stderr and '"token_ids"' in first.stdout
    assert not (tmp_path / "cache" / "models").exists()  # nothing built into the cache
    print(f"first run {t_first:.1f}s")
