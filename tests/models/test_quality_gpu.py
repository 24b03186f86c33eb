"""On the GPU, on the trained embedded model (peaked logits, so a flipped token means something): execution paths
agree on greedy tokens, 64 prompts x 128 tokens. float32 paths >= 99.9% of tokens; bf16 batched vs alone and CUDA
graphs vs eager >= 99% (the issue's thresholds)."""

from __future__ import annotations

import pytest

from quickmoe.bench.quality import QualityBenchOptions, run_quality_bench
from quickmoe.checkpoint.default_model import embedded_model_dir

pytestmark = pytest.mark.gpu


def _rows(dtype: str, only: tuple[str, ...]) -> dict:
    report = run_quality_bench(QualityBenchOptions(model=str(embedded_model_dir()), num_prompts=64, prompt_len=64,
                                                   max_tokens=128, eval_tokens=16384, dtype=dtype, device="cuda",
                                                   only=only))
    return {r["pair"]: r for r in report["rows"]}


def test_float32_paths_agree_on_999_per_mille_of_greedy_tokens():
    rows = _rows("float32", ("alone", "whole", "not cached", "eager vs CUDA graphs", "torch MoE", "graphs: alone"))
    assert len(rows) == 6
    for label, row in rows.items():
        assert row["token_agreement"] >= 0.999, (label, row)


def test_bf16_batch_invariance_and_graphs_agree_on_99_percent_of_greedy_tokens():
    rows = _rows("bfloat16", ("alone", "eager vs CUDA graphs", "graphs: alone"))
    assert len(rows) == 3
    for label, row in rows.items():
        assert row["token_agreement"] >= 0.99, (label, row)


def test_bf16_parts_from_float32_only_at_near_ties():
    """bf16 against float32 is a pair of arithmetics, not of paths: on this small model greedy decoding meets
    near ties often (on the H100, 53-60% of tokens agree before the first divergence, and the float32 margin
    between its top two tokens where bf16 chose the other has a median of 0.02 nats). What a bug would break:
    the log-probabilities stay within 10% of float32's (measured 5.6%), bf16 flips tokens only where float32's
    top two are within 0.1 nats (median), and at least 40% of tokens agree."""
    row = _rows("bfloat16", ("float32 vs bf16",))["float32 vs bf16"]
    assert row["max_rel"] <= 0.1, row
    assert row["median_margin_at_divergence"] is None or row["median_margin_at_divergence"] <= 0.1, row
    assert row["token_agreement"] >= 0.4, row
