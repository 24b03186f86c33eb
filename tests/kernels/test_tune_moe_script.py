"""scripts/tune_moe.py writes what the kernels read: every MoEKernelConfig field survives its tables, and GEMM 1's
prefill candidates try the gate and up rows in one dot as well as in two (decode candidates: two)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from quickmoe.kernels.moe_configs import MoEKernelConfig

pytest.importorskip("triton")


def _tuner():
    path = Path(__file__).resolve().parents[2] / "scripts" / "tune_moe.py"
    spec = importlib.util.spec_from_file_location("tune_moe_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_config_field_survives_the_written_table():
    tuner = _tuner()
    config = MoEKernelConfig(block_m=128, block_n=64, block_k=128, num_warps=8, num_stages=5, swap_ab=True,
                             group_m=3, gate_up_one_dot=True)  # every field away from its default
    assert MoEKernelConfig(**json.loads(json.dumps(tuner._as_dict(config)))) == config


def test_prefill_candidates_try_one_dot_and_decode_candidates_do_not():
    tuner = _tuner()
    prefill = tuner.gemm1_candidates(128, quick=False)
    assert {c.gate_up_one_dot for c in prefill} == {False, True}
    assert len(prefill) == 2 * len({c for c in prefill if not c.gate_up_one_dot})
    assert not any(c.gate_up_one_dot for c in tuner.gemm1_candidates(16, quick=False))
    assert not any(c.gate_up_one_dot for c in tuner.gemm1_candidates(16, quick=True))
