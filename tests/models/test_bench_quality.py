"""`bench quality` on the CPU: the comparison arithmetic, and a smoke run on the embedded model whose CPU rows must
agree (float32: batched = alone = chunked = prefix-cached, token for token) while CUDA rows say n/a."""

from __future__ import annotations

import json

import pytest

from quickmoe.bench.quality import QualityBenchOptions, run_quality_bench
from quickmoe.bench.quality_compare import GreedyRun, compare
from quickmoe.checkpoint.default_model import embedded_model_dir
from quickmoe.cli import main
from quickmoe.errors import ConfigError


def _run(tokens, lp):
    return GreedyRun(tuple(tuple(t) for t in tokens), tuple(tuple(p) for p in lp))


def test_compare_counts_tokens_until_the_first_divergence_and_logprob_differences():
    a = _run([[1, 2, 3, 4], [5, 6]], [[{1: -0.1, 9: -3.0}, {2: -0.2, 7: -0.5}, {3: -0.1}, {4: -0.1}],
                                      [{5: -0.1}, {6: -0.1}]])
    b = _run([[1, 7, 3, 4], [5, 6]], [[{1: -0.15, 9: -3.0}, {7: -0.4, 2: -0.6}, {3: -0.1}, {4: -0.1}],
                                      [{5: -0.1}, {6: -0.1}]])
    ag = compare(a, b)
    assert (ag.prompts, ag.identical_prompts, ag.tokens, ag.agreeing_tokens) == (2, 1, 6, 3)
    assert ag.token_agreement == pytest.approx(0.5)
    assert ag.max_abs == pytest.approx(0.4)  # token 2 at the divergence step: -0.2 vs -0.6
    assert ag.median_margin_at_divergence == pytest.approx(0.3)  # A's -0.2 vs -0.5
    assert compare(a, a).token_agreement == 1.0 and compare(a, a).max_abs == 0.0


def test_bench_quality_cpu_rows_agree_and_cuda_rows_are_not_applicable(tmp_path):
    report = run_quality_bench(QualityBenchOptions(
        model=str(embedded_model_dir()), num_prompts=4, prompt_len=24, max_tokens=12, eval_tokens=1024,
        device="cpu", kv_cache_memory=64 << 20, json_out=str(tmp_path / "q.json")))
    assert json.loads((tmp_path / "q.json").read_text())["rows"] == report["rows"]
    rows = {r["pair"]: r for r in report["rows"]}
    for label in ("alone vs batch of 4", "whole vs chunked prefill", "not cached vs prefix-cached"):
        assert rows[label]["token_agreement"] == 1.0 and rows[label]["max_abs"] < 1e-3, rows[label]
    assert rows["float32 vs bf16"]["tokens"] == 48 and rows["float32 vs bf16"]["max_abs"] > 0  # a real difference
    for label in ("eager vs CUDA graphs", "eager vs compiled", "torch MoE vs Triton MoE"):
        assert rows[label]["result"] == "n/a (needs CUDA)"
    ppl = report["perplexity"]["float32"]
    assert ppl["perplexity"] < report["uniform_perplexity"] / 50 and ppl["accuracy"] > 0.3


def test_bench_quality_command_line_and_errors(capsys, tmp_path):
    assert main(["bench", "quality", "--num-prompts", "2", "--prompt-len", "8", "--max-tokens", "4",
                 "--eval-tokens", "512", "--device", "cpu", "--kv-cache-memory", "64MiB", "--only", "alone",
                 "-q"]) == 0
    out = capsys.readouterr().out
    assert "| alone vs batch of 2 | 2/2 | 100.00% (8/8)" in out and "perplexity" in out
    with pytest.raises(ConfigError, match="num_prompts"):
        QualityBenchOptions(model=str(embedded_model_dir()), num_prompts=0)
    with pytest.raises(ConfigError, match="not a checkpoint"):
        QualityBenchOptions(model=str(tmp_path))
