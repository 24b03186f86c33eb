"""`bench attention`'s options and table (the timings need a GPU: docs/benchmarks.md has them)."""

from __future__ import annotations

import random

import pytest

from quickmoe.bench.attention import AttentionBenchOptions, format_attention_table
from quickmoe.errors import ConfigError


def _doc(floor_s):
    rng = random.Random(5)
    kv_bytes = rng.randrange(1 << 20, 1 << 30)
    ours, sdpa = rng.uniform(2e-6, 1e-3), rng.uniform(2e-6, 1e-3)
    doc = {"device": "GPU", "ceilings": {"hbm_gb_per_s": 3000.0, "bf16_tflops": 700.0}, "kv_layout": "head-major",
           "block_size": 16, "prefill": [],
           "decode": [{"batch": 8, "context": 4096, "window": 0, "kv_bytes": kv_bytes, "quickmoe_s": ours,
                       "sdpa_s": sdpa, "quickmoe_gb_per_s": kv_bytes / ours / 1e9,
                       "sdpa_gb_per_s": kv_bytes / sdpa / 1e9}]}
    if floor_s is not None:
        doc["kernel_floor_s"] = floor_s
    return doc, kv_bytes, ours, sdpa


def test_the_table_shows_each_point_against_hbm_and_sdpa_and_the_kernel_floor():
    doc, kv_bytes, ours, sdpa = _doc(2.345e-6)
    table = format_attention_table(doc)
    assert "one kernel node takes 2.3 us" in table
    row = next(line for line in table.splitlines() if line.split()[:3] == ["8", "4096", "0"])
    fields = row.split()
    assert float(fields[4]) == pytest.approx(ours * 1e6, abs=0.06)
    assert float(fields[6]) == pytest.approx(100 * kv_bytes / ours / 1e9 / 3000.0, abs=0.06)
    assert float(fields[9]) == pytest.approx(sdpa / ours, abs=0.006)
    assert "kernel node" not in format_attention_table(_doc(None)[0])  # JSON of older runs


@pytest.mark.parametrize("field,value", [("batches", (0,)), ("windows", (-1,)), ("reps", 0), ("block_size", 12),
                                         ("kv_layout", "row-major"), ("prefill", ((1, 0),))])
def test_bad_options_name_the_field(field, value):
    with pytest.raises(ConfigError, match=field):
        AttentionBenchOptions(**{field: value})


def test_the_cli_defaults_are_the_options_defaults(monkeypatch):
    """`quickmoe bench attention` with no option runs AttentionBenchOptions() (the parser keeps its own copy of the
    grid as strings, so that --help imports no torch)."""
    from quickmoe.bench import attention
    from quickmoe.cli import build_parser

    ran = []
    monkeypatch.setattr(attention, "run_attention_bench", ran.append)
    args = build_parser().parse_args(["bench", "attention"])
    args.func(args)
    assert ran == [AttentionBenchOptions()]


def _row(batch: int, context: int, window: int, ours: float, sdpa: float) -> dict:
    return {"batch": batch, "context": context, "window": window, "kv_bytes": 1 << 24, "quickmoe_s": ours,
            "sdpa_s": sdpa, "quickmoe_gb_per_s": (1 << 24) / ours / 1e9, "sdpa_gb_per_s": (1 << 24) / sdpa / 1e9}


def test_the_summary_names_where_sdpa_leads_most():
    """The acceptance asks decode attention never to be slower than SDPA: the table's last decode line counts the
    points where it is (by the printed two decimals) and names the worst; the prefill line the same."""
    rng = random.Random(11)
    ours = [rng.uniform(5e-6, 5e-4) for _ in range(5)]
    ratios = [1.31, 0.97, 0.86, 1.00, 0.998]  # 0.998 prints as 1.00: not counted
    doc, _, _, _ = _doc(None)
    doc["decode"] = [_row(b, 1024 * b, 0, t, t * r) for b, t, r in zip((1, 8, 32, 64, 256), ours, ratios)]
    doc["prefill"] = [{"batch": 1, "length": 1024, "window": 0, "quickmoe_s": 4e-5, "quickmoe_tflops": 200.0,
                       "sdpa_s": 3.6e-5, "sdpa_tflops": 240.0},
                      {"batch": 1, "length": 1024, "window": 128, "quickmoe_s": 2.6e-5, "quickmoe_tflops": 80.0,
                       "sdpa_s": None, "sdpa_tflops": None}]
    lines = format_attention_table(doc).splitlines()
    assert "decode: SDPA faster at 2 of 5 points; most at 32 x 32768, window 0 (SDPA / ours 0.86)" in lines
    assert "prefill: SDPA faster at 1 of 1 points; most at 1 x 1024, window 0 (SDPA / ours 0.90)" in lines
    doc["decode"] = [_row(1, 1024, 0, 1e-5, 1.2e-5)]
    assert "decode: not slower than SDPA at any of the 1 points" in format_attention_table(doc).splitlines()
