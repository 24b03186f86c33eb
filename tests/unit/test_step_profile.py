"""The op families of `bench generate`'s and the server's step profiles (executor/op_profile.py) by kernel name:
every kernel of the MoE's modules counts as "moe" (the register-operand GEMM 1 is named like a GEMM, and the
alignment's prefill-sized kernels have names of their own), the dense GEMMs as "dense", attention's as "attention";
and a trace's summary per step."""

from __future__ import annotations

import importlib

import pytest

from quickmoe.executor.op_profile import op_family, summarize_kernels

pytest.importorskip("triton")


def _kernels(module: str) -> list[str]:
    """The names of a kernel module's launched functions (`triton.jit` or `gluon.jit`; interpreted ones on CPU)."""
    names = [n for n, v in vars(importlib.import_module(f"quickmoe.kernels.{module}")).items()
             if n.endswith("_kernel") and callable(getattr(v, "fn", None))]
    assert names, module
    return names


@pytest.mark.parametrize("module,family", [
    ("moe_gemm", "moe"), ("moe_gemm_register", "moe"), ("moe_gather_permuted", "moe"), ("moe_align", "moe"),
    ("router", "moe"), ("routing", "moe"), ("moe_fp8_gemv", "moe"),
    ("dense_gemm", "dense"), ("fp8_gemm", "dense"), ("fp8_gemv", "dense"), ("decode_attention", "attention"),
    ("prefill_attention", "attention"), ("rotary_kv_write", "attention")])
def test_each_kernel_of_a_module_lands_in_its_family(module, family):
    assert {name: op_family(name) for name in _kernels(module)} == dict.fromkeys(_kernels(module), family)


def test_libraries_kernels():
    assert op_family("sm90_xmma_gemm_bf16bf16_bf16f32") == "dense"
    assert op_family("ncclDevKernel_AllReduce_Sum_bf16_RING_LL") == "communication"
    assert op_family("vectorized_elementwise_kernel") == "other"


def test_a_trace_is_summed_by_family_per_step():
    """Each kernel's time goes to its family, per step; the shares are of the kernels' total; the top list is the
    longest kernels first."""
    import random

    rng = random.Random()
    steps, calls = rng.randrange(2, 9), rng.randrange(100, 400)
    per_kernel = {"_gemm1_swiglu_kernel": rng.uniform(100, 900), "_decode_split_kernel": rng.uniform(10, 90),
                  "nvjet_sm90_tst_64x8": rng.uniform(50, 400), "_rms_norm_kernel": rng.uniform(1, 30),
                  "_moe_combine_kernel": rng.uniform(1, 30)}
    doc = summarize_kernels(per_kernel, calls, steps)
    total = sum(per_kernel.values())
    moe = per_kernel["_gemm1_swiglu_kernel"] + per_kernel["_moe_combine_kernel"]
    assert doc["ms_per_step"]["moe"] == pytest.approx(moe / 1e3 / steps)
    assert doc["ms_per_step"]["other"] == pytest.approx(per_kernel["_rms_norm_kernel"] / 1e3 / steps)
    assert doc["shares"]["dense"] == pytest.approx(per_kernel["nvjet_sm90_tst_64x8"] / total)
    assert doc["gpu_ms_per_step"] == pytest.approx(total / 1e3 / steps) and doc["kernels_per_step"] == calls / steps
    assert [name for name, _ in doc["top"]] == sorted(per_kernel, key=per_kernel.get, reverse=True)
