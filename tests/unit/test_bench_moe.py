"""`quickmoe bench moe` plumbing on CPU (the kernels in Triton's interpreter, a tiny shape): options are
validated, the table prints every implementation it could time, and the JSON holds the figures."""

from __future__ import annotations

import json

import pytest

from quickmoe.errors import ConfigError

pytest.importorskip("triton")


def test_options_are_validated():
    from quickmoe.bench.moe import MoEBenchOptions

    with pytest.raises(ConfigError, match="'shapes' = \\['gpt-oss-7b'\\]: expected names among"):
        MoEBenchOptions(shapes=("gpt-oss-7b",))
    with pytest.raises(ConfigError, match="'tokens' = \\[0\\]"):
        MoEBenchOptions(tokens=(0,))
    with pytest.raises(ConfigError, match="'formats' = \\['int4'\\]"):
        MoEBenchOptions(formats=("int4",))
    MoEBenchOptions(shapes=("qwen3-30b-a3b", "mixtral-8x7b"), formats=("bf16", "fp8", "nvfp4"))


def test_new_shapes_are_the_published_models():
    from quickmoe.bench.moe_experts import SHAPES

    qwen, mixtral = SHAPES["qwen3-30b-a3b"], SHAPES["mixtral-8x7b"]
    assert (qwen.experts, qwen.top_k, qwen.hidden, qwen.inter, qwen.activation) == (128, 8, 2048, 768, "silu")
    assert (mixtral.experts, mixtral.top_k, mixtral.hidden, mixtral.inter) == (8, 2, 4096, 14336)
    assert qwen.formats == mixtral.formats == ("bf16", "fp8", "nvfp4")


def test_cli_accepts_the_new_shapes(monkeypatch):
    from quickmoe import cli

    seen = {}
    monkeypatch.setattr("quickmoe.bench.moe.run_moe_bench", lambda opts: seen.setdefault("opts", opts))
    assert cli.main(["bench", "moe", "--shapes", "qwen3-30b-a3b,mixtral-8x7b", "--formats", "bf16,fp8"]) == 0
    assert seen["opts"].shapes == ("qwen3-30b-a3b", "mixtral-8x7b") and seen["opts"].formats == ("bf16", "fp8")


@pytest.mark.slow
def test_bench_moe_runs_on_cpu(tmp_path, capsys):
    from quickmoe.bench.moe import MoEBenchOptions, run_moe_bench

    out = tmp_path / "moe.json"
    doc = run_moe_bench(MoEBenchOptions(shapes=("tiny",), tokens=(3,), device="cpu", warmup=0, iters=1,
                                        json_out=str(out)))
    table = capsys.readouterr().out
    assert "tiny" in table and "quickmoe us" in table
    row = json.loads(out.read_text())["rows"][0]
    assert row == doc["rows"][0] and row["tokens"] == 3
    assert row["quickmoe_s"] > 0 and row["reference_s"] > 0 and row["hbm_gb_per_s"] > 0


@pytest.mark.slow
def test_bench_moe_silu_shape_runs_every_format_on_cpu(capsys):
    from quickmoe.bench.moe import MoEBenchOptions, run_moe_bench

    doc = run_moe_bench(MoEBenchOptions(shapes=("tiny-silu",), tokens=(3,), device="cpu", warmup=0, iters=1))
    assert [r["format"] for r in doc["rows"]] == ["bf16", "fp8", "nvfp4"]
    assert all(r["reference_s"] > 0 and r["quickmoe_s"] > 0 for r in doc["rows"])
    assert "tiny-silu" in capsys.readouterr().out
