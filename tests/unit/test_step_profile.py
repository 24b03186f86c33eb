"""`bench generate`'s op families (bench/step_profile.py) by kernel name: every kernel of the MoE's modules counts as
"moe" (the register-operand GEMM 1 is named like a GEMM, and the alignment's prefill-sized kernels have names of their
own), the dense GEMMs as "dense", attention's as "attention"."""

from __future__ import annotations

import importlib

import pytest

from quickmoe.bench.step_profile import op_family

pytest.importorskip("triton")


def _kernels(module: str) -> list[str]:
    """The names of a kernel module's launched functions (`triton.jit` or `gluon.jit`; interpreted ones on CPU)."""
    names = [n for n, v in vars(importlib.import_module(f"quickmoe.kernels.{module}")).items()
             if n.endswith("_kernel") and callable(getattr(v, "fn", None))]
    assert names, module
    return names


@pytest.mark.parametrize("module,family", [
    ("moe_gemm", "moe"), ("moe_gemm_register", "moe"), ("moe_gather_permuted", "moe"), ("moe_align", "moe"),
    ("router", "moe"), ("routing", "moe"),
    ("dense_gemm", "dense"), ("fp8_gemm", "dense"), ("decode_attention", "attention"),
    ("prefill_attention", "attention"), ("rotary_kv_write", "attention")])
def test_each_kernel_of_a_module_lands_in_its_family(module, family):
    assert {name: op_family(name) for name in _kernels(module)} == dict.fromkeys(_kernels(module), family)


def test_libraries_kernels():
    assert op_family("sm90_xmma_gemm_bf16bf16_bf16f32") == "dense"
    assert op_family("ncclDevKernel_AllReduce_Sum_bf16_RING_LL") == "communication"
    assert op_family("vectorized_elementwise_kernel") == "other"
