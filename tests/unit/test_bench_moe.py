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
