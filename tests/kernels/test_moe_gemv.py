"""`fused_moe_gemv` (Triton; the interpreter on CPU) against `fused_moe_ref` in float64 on fresh random MXFP4
experts in the grouped kernel layout: T = 1 to 4, top-k 1 and 4, a ragged last gate/up group, K not a multiple
of the K step, both activations, tiles smaller than the group; and the two kernels one by one (GEMM 1's
SwiGLU rows, GEMM 2 with the combine) against a naive torch loop."""

from __future__ import annotations

import pytest
import torch

from quickmoe.kernels.fused_moe import fused_moe_ref, swiglu_gpt_oss
from quickmoe.kernels.routing import route_ref
from quickmoe.layouts.mxfp4_moe import dequantize_expert

pytest.importorskip("triton")
from quickmoe.kernels.moe_gemv import GemvConfig, fused_moe_gemv, moe_gemv1_swiglu, moe_gemv2_combine  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _mxfp4(num_experts, n, k, g):
    """Random MXFP4 in the kernel layout: blocks [E, n, k/2], scales [E, k/32, n] around 2^0."""
    blocks = torch.randint(0, 256, (num_experts, n, k // 2), dtype=torch.uint8, generator=g)
    scales = torch.randint(121, 129, (num_experts, k // 32, n), dtype=torch.uint8, generator=g)
    return blocks.to(DEVICE), scales.to(DEVICE)


@pytest.mark.parametrize("activation", ["swiglu_gpt_oss", "silu"])
@pytest.mark.parametrize("num_tokens,top_k,num_experts,hidden,inter,config", [
    (1, 4, 8, 96, 96, GemvConfig(block_n1=16, block_n2=16, block_k=64)),  # H = 96: ragged last K step
    (3, 1, 8, 64, 160, GemvConfig(block_n1=32, block_n2=16, block_k=128)),  # groups 64, 64, ragged 32
    (4, 4, 6, 160, 64, GemvConfig(block_n1=64, block_n2=32, block_k=32, num_warps=2)),
])
def test_fused_moe_gemv_matches_the_reference(activation, num_tokens, top_k, num_experts, hidden, inter, config):
    g = torch.Generator().manual_seed(num_tokens * 11 + hidden + inter + len(activation))
    w1, s1 = _mxfp4(num_experts, 2 * inter, hidden, g)
    w2, s2 = _mxfp4(num_experts, hidden, inter, g)
    b1 = torch.randn(num_experts, 2 * inter, generator=g).to(DEVICE)
    b2 = torch.randn(num_experts, hidden, generator=g).to(DEVICE)
    x = torch.randn(num_tokens, hidden, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(num_tokens, num_experts, generator=g).to(DEVICE), top_k)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64, swiglu_limit=7.0, swiglu_alpha=1.702,
              activation=activation)
    got = fused_moe_gemv(x, weights, ids, w1, b1, w2, b2, config=config, **kw)
    want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1, b1.double(), w2, b2.double(), **kw)
    assert got.shape == (num_tokens, hidden) and got.dtype == torch.float32
    err = (got.double() - want).norm() / want.norm()
    assert err < 1e-5, err


def test_each_gemv_kernel_matches_a_naive_loop():
    g = torch.Generator().manual_seed(3)
    num_experts, hidden, inter, group, top_k = 5, 96, 128, 64, 2
    w1, s1 = _mxfp4(num_experts, 2 * inter, hidden, g)
    w2, s2 = _mxfp4(num_experts, hidden, inter, g)
    b1 = torch.randn(num_experts, 2 * inter, generator=g).to(DEVICE)
    b2 = torch.randn(num_experts, hidden, generator=g).to(DEVICE)
    x = torch.randn(2, hidden, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(2, num_experts, generator=g).to(DEVICE), top_k)
    inter_rows = moe_gemv1_swiglu(x, ids, w1, b1, s1, group, 7.0, 1.702, config=GemvConfig(block_k=32))
    out = moe_gemv2_combine(inter_rows, ids, weights, w2, b2, s2, config=GemvConfig(block_k=64))
    want_inter, want_out = [], torch.zeros(2, hidden, dtype=torch.float64)
    for a, e in enumerate(ids.reshape(-1).tolist()):
        t = a // top_k
        h = x[t].double().cpu() @ dequantize_expert(w1[e].cpu(), s1[e].cpu(), torch.float64).T + b1[e].double().cpu()
        want_inter.append(swiglu_gpt_oss(h, 7.0, 1.702, group))
        y = want_inter[-1] @ dequantize_expert(w2[e].cpu(), s2[e].cpu(), torch.float64).T + b2[e].double().cpu()
        want_out[t] += y * weights.reshape(-1)[a].double().cpu()
    want_inter = torch.stack(want_inter)
    assert (inter_rows.double().cpu() - want_inter).norm() / want_inter.norm() < 1e-5
    # GEMM 2 fed the kernel's own intermediate rows: only its own error remains
    want_out2 = torch.zeros(2, hidden, dtype=torch.float64)
    for a, e in enumerate(ids.reshape(-1).tolist()):
        y = inter_rows[a].double().cpu() @ dequantize_expert(w2[e].cpu(), s2[e].cpu(), torch.float64).T
        want_out2[a // top_k] += (y + b2[e].double().cpu()) * weights.reshape(-1)[a].double().cpu()
    assert (out.double().cpu() - want_out2).norm() / want_out2.norm() < 1e-5
    assert (out.double().cpu() - want_out).norm() / want_out.norm() < 1e-4


def test_fused_moe_gemv_bf16_activations():
    g = torch.Generator().manual_seed(8)
    w1, s1 = _mxfp4(8, 256, 96, g)
    w2, s2 = _mxfp4(8, 96, 128, g)
    b1 = torch.randn(8, 256, generator=g).to(torch.bfloat16).to(DEVICE)
    b2 = torch.randn(8, 96, generator=g).to(torch.bfloat16).to(DEVICE)
    x = torch.randn(2, 96, generator=g).to(torch.bfloat16).to(DEVICE)
    weights, ids = route_ref(torch.randn(2, 8, generator=g).to(DEVICE), 4)
    got = fused_moe_gemv(x, weights, ids, w1, b1, w2, b2, w1_scales=s1, w2_scales=s2, gate_up_group=64)
    want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1, b1.double(), w2, b2.double(),
                         w1_scales=s1, w2_scales=s2, gate_up_group=64)
    assert got.dtype == torch.bfloat16
    tolerance = 1e-2 if DEVICE == "cuda" else 2e-2  # the interpreter truncates to bf16 (see test_fused_moe)
    assert (got.double() - want).norm() / want.norm() < tolerance


def test_gemv_config_rejects_bad_tiles():
    with pytest.raises(ValueError, match="block_k = 48"):
        GemvConfig(block_k=48)
    with pytest.raises(ValueError, match="block_n1 = 24"):
        GemvConfig(block_n1=24)


def test_fused_moe_gemv_needs_mxfp4():
    x = torch.randn(1, 64, device=DEVICE)
    w = torch.randn(2, 128, 64, device=DEVICE)
    ids = torch.zeros(1, 1, dtype=torch.int32, device=DEVICE)
    with pytest.raises(ValueError, match="expected MXFP4 experts"):
        fused_moe_gemv(x, torch.ones(1, 1, device=DEVICE), ids, w, None, w, None, w1_scales=None, w2_scales=None,
                       gate_up_group=64)
