"""`quickmoe bench generate` on a small checkpoint on CPU: the table and JSON, transformers side by side, and the
decode roofline's bytes (every weight once, k/E of the experts, one embedding row, the KV cache read)."""

from __future__ import annotations

import json
import random

import pytest

from quickmoe.bench.generate import GenerateBenchOptions, decode_bytes_per_step, run_generate_bench
from quickmoe.errors import ConfigError
from quickmoe.executor.step_timer import StepTimer
from quickmoe.llm import LLM


@pytest.fixture(scope="module")
def model_dir(ckpt_factory):
    return ckpt_factory(layers=2, experts=4, hidden_size=64, intermediate_size=64, num_experts_per_tok=2,
                        sliding_window=16, seed=21)


def test_bench_generate_runs_with_transformers_side_by_side(model_dir, tmp_path, capsys):
    out = tmp_path / "bench.json"
    doc = run_generate_bench(GenerateBenchOptions(
        model=str(model_dir), num_prompts=5, input_len=12, output_len=6, decode_steps=4, baseline="transformers",
        baseline_prompts=2, baseline_batch_size=2, json_out=str(out), engine=dict(device="cpu")))
    table = capsys.readouterr().out
    assert "quickmoe" in table and "transformers" in table and "decode at batch 1" in table
    saved = json.loads(out.read_text())
    assert saved["quickmoe"]["output_tokens"] == 5 * 6 == doc["quickmoe"]["output_tokens"]
    startup = saved["startup"]  # the model's start-up, as the table shows it
    assert startup["phases"]["load"] > 0 and startup["total"] >= startup["phases"]["load"]
    assert startup["info"]["load_bytes"] > 0 and startup["info"]["device"] == "cpu"
    assert doc["transformers"]["output_tokens"] == 2 * 6 and doc["transformers"]["num_prompts"] == 2
    assert doc["decode_batch1"]["steps"] == 4 and doc["decode_batch1"]["roofline_s"] is None  # no HBM on CPU
    assert doc["op_families"] == {"batch1": None, "batch5": None, "mixed": None}  # CUDA kernels only


def test_decode_bytes_count_weights_experts_and_kv(model_dir):
    llm = LLM(model_dir, device="cpu", max_model_len=64)
    model, config = llm.runner.model, llm.config
    short = decode_bytes_per_step(model, config, 10, 4)
    # one more token of context: K and V of every layer (the sliding layer's window of 16 is not full yet)
    per_token = 2 * config.num_key_value_heads * config.head_dim * 4
    assert decode_bytes_per_step(model, config, 11, 4) - short == config.num_hidden_layers * per_token
    # past the window only the full-attention layer reads more
    assert decode_bytes_per_step(model, config, 41, 4) - decode_bytes_per_step(model, config, 40, 4) == per_token
    params = dict(model.named_parameters())
    experts = sum(p.numel() * p.element_size() for n, p in params.items() if ".experts." in n)
    embed = params["model.embed_tokens.weight"]
    kv = config.num_hidden_layers * 10 * per_token
    everything = sum(p.numel() * p.element_size() for p in params.values())
    want = everything - experts // 2 - embed.numel() * embed.element_size() + embed.shape[1] * 4 + kv  # top-2 of 4
    assert short == want


def test_options_are_validated(model_dir, tmp_path):
    with pytest.raises(ConfigError, match="not a checkpoint directory"):
        GenerateBenchOptions(model=str(tmp_path))
    with pytest.raises(ConfigError, match="'input_len' = 0"):
        GenerateBenchOptions(model=str(model_dir), input_len=0)


@pytest.mark.parametrize("preset,overrides", [
    ("qwen3-moe-tiny", dict(hidden_size=64, head_dim=16, moe_intermediate_size=32, intermediate_size=64)),
    ("mixtral-tiny", dict(hidden_size=64, intermediate_size=96)),
])
def test_bench_generate_runs_on_every_family(ckpt_factory, preset, overrides, capsys):
    """Qwen3-MoE and Mixtral checkpoints (their generated tokenizers: Qwen's specials at the end of the
    vocabulary, Mixtral's <unk>, <s>, </s> at 0-2) run `bench generate` end to end: every prompt id is ordinary
    text. Mixtral's run stopped before prompts were drawn past its leading special tokens (2026-11-29)."""
    model_dir = ckpt_factory(preset=preset, experts_dtype="bf16", layers=2, experts=4, **overrides)
    doc = run_generate_bench(GenerateBenchOptions(model=str(model_dir), num_prompts=3, input_len=10, output_len=4,
                                                  decode_steps=2, engine=dict(device="cpu")))
    assert doc["quickmoe"]["output_tokens"] == 3 * 4 and "quickmoe" in capsys.readouterr().out


def test_the_run_reports_its_seconds_outside_the_steps(model_dir, monkeypatch, capsys):
    """The run's wall time less its steps' (first step's start to last step's end: the step timer's, CUDA only, so
    given here): the host work before the first step and after the last, in the JSON and the table."""
    wall_ms = random.uniform(0.5, 3.0)  # well under the run's seconds on any machine
    summary = {"steps": 7, "gpu_ms_median": 0.1, "gpu_ms_total": 0.7, "by_kind": {}, "idle_ms_total": 0.0,
               "idle_ms_median": 0.0, "wall_ms": wall_ms, "exposed_host_fraction": 0.0, "batch_size_median": 3,
               "host_queue_ms_median": 0.1, "host_cycle_ms_median": 0.2}
    monkeypatch.setattr(StepTimer, "summary", lambda self: dict(summary))
    doc = run_generate_bench(GenerateBenchOptions(model=str(model_dir), num_prompts=3, input_len=10, output_len=4,
                                                  decode_steps=2, engine=dict(device="cpu")))
    q = doc["quickmoe"]
    assert q["steps"]["outside_steps_s"] == pytest.approx(q["seconds"] - wall_ms / 1e3, abs=1e-9)
    assert f"{q['steps']['outside_steps_s']:.3f} s of the run outside its steps" in capsys.readouterr().out


def test_the_op_family_profile_starts_with_every_prompt_decoding(model_dir):
    """`start_decoding` (the profile's start): with prefills that take many steps (here 16 prompts of 48 tokens at 32
    tokens a step), every request is still running when it returns, none finished, so a profile labelled with
    the prompts' count profiles that many rows (its requests stopped after 24 tokens until 2026-11-30)."""
    from quickmoe.bench.step_profile import start_decoding

    llm = LLM(model_dir, device="cpu", max_num_batched_tokens=32, max_num_seqs=16, max_model_len=256)
    engine = llm.engine
    rng = random.Random()
    prompts = [[rng.randrange(llm.config.vocab_size - 2) for _ in range(48)] for _ in range(16)]
    steps_before = engine.scheduler.num_scheduled_tokens
    ids = start_decoding(engine, prompts)
    assert engine.scheduler.num_scheduled_tokens - steps_before >= 16 * 48  # the prompts were computed
    running = {s.request_id for s in engine.scheduler.running}
    assert running == set(ids) and not any(s.finished for s in engine.scheduler.running)
    for rid in ids:
        engine.abort(rid)
    while engine.has_unfinished():
        engine.step()


def test_the_mixed_profile_starts_where_every_next_step_is_mixed(model_dir):
    """`start_mixing` (the mixed profile's start): after it, the steps the profile times each carry a chunk of
    prompt tokens beside decode rows (the step timer's kinds, host-timed on the CPU), as the throughput run's first
    steps do; a start that ran the prefills to their end (as `start_decoding` does) times decode steps."""
    from quickmoe.bench.step_profile import start_mixing

    llm = LLM(model_dir, device="cpu", max_num_batched_tokens=32, max_num_seqs=16, max_model_len=256)
    engine, timer = llm.engine, llm.runner.step_timer
    rng = random.Random()
    length = rng.randrange(40, 56)
    prompts = [[rng.randrange(llm.config.vocab_size - 2) for _ in range(length)] for _ in range(16)]
    ids = start_mixing(engine, prompts)
    timer.enabled = True
    timer.reset()
    for _ in range(4):
        engine.step()
    kinds = timer.summary()["by_kind"]
    timer.enabled = False
    assert set(kinds) == {"mixed"} and kinds["mixed"]["steps"] == 4
    assert kinds["mixed"]["tokens"] == 4 * 32  # each step full: decode rows, and prompt tokens in the rest
    for rid in ids:
        engine.abort(rid)
    while engine.has_unfinished():
        engine.step()


def test_the_table_names_what_the_mixed_profile_timed():
    """The mixed profile's line gives the tokens a step from the profiled steps' kinds, and each kind's count."""
    from quickmoe.bench.generate import _profiled_steps

    tokens = random.randrange(4000, 9000)
    prof = {"kind": "mixed", "batch_size": 256, "steps": 4,
            "step_kinds": {"mixed": {"steps": 3, "tokens": 3 * tokens}, "decode": {"steps": 1, "tokens": 256}}}
    line = _profiled_steps(prof)
    assert f"{(3 * tokens + 256) / 4:.0f} tokens a step" in line and "3 mixed, 1 decode" in line
    assert _profiled_steps({"kind": "decode", "batch_size": 64}) == "decode step at batch 64"


def test_the_mixed_profile_gets_prompts_the_run_did_not_cache(model_dir, monkeypatch):
    """The mixed profile's prompts are not the throughput run's: those are in the prefix cache by then, and their
    prefills would be skipped (the GPU run of 64 prompts profiled decode steps as "mixed")."""
    from quickmoe.bench import generate

    seen = {}
    monkeypatch.setattr(generate, "profile_mixed", lambda llm, prompts, steps: seen.__setitem__("mixed", prompts))
    real_generate = LLM.generate
    monkeypatch.setattr(LLM, "generate", lambda self, prompts, params: seen.setdefault("runs", []).append(prompts)
                        or real_generate(self, prompts, params))
    generate.run_generate_bench(GenerateBenchOptions(model=str(model_dir), num_prompts=4, input_len=10, output_len=3,
                                                     decode_steps=2, seed=random.randrange(1000),
                                                     engine=dict(device="cpu")))
    run_prompts = {tuple(p) for prompts in seen["runs"] for p in prompts}
    assert len(seen["mixed"]) == 4 and all(len(p) == 10 for p in seen["mixed"])
    assert not any(tuple(p[:8]) == tuple(q[:8]) for p in seen["mixed"] for q in run_prompts)
