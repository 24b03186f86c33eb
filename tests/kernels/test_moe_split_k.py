"""Split-K MoE GEMMs (`MoEKernelConfig.k_parts` / `split_k`, kernels/moe_split_k.py): `fused_moe` with K summed
in parts, by one program or by one program per part, against `fused_moe_ref` in float64; a split and an
unsplit launch with the same parts give the same bits (bf16 too on a GPU: the batch-invariance argument);
the finishing kernels against their torch references."""

from __future__ import annotations

import pytest
import torch

from quickmoe.kernels.fused_moe import fused_moe, fused_moe_ref
from quickmoe.kernels.routing import route_ref

pytest.importorskip("triton")
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _experts(e, hidden, inter, mxfp4, dtype, g):
    if mxfp4:  # kernel layout: blocks [E, n, k/2], scales [E, k/32, n] near 2^0
        w1 = torch.randint(0, 256, (e, 2 * inter, hidden // 2), dtype=torch.uint8, generator=g)
        s1 = torch.randint(122, 128, (e, hidden // 32, 2 * inter), dtype=torch.uint8, generator=g)
        w2 = torch.randint(0, 256, (e, hidden, inter // 2), dtype=torch.uint8, generator=g)
        s2 = torch.randint(122, 128, (e, inter // 32, hidden), dtype=torch.uint8, generator=g)
        w1, s1, w2, s2 = (t.to(DEVICE) for t in (w1, s1, w2, s2))
    else:
        w1 = (torch.randn(e, 2 * inter, hidden, generator=g) / hidden**0.5).to(dtype).to(DEVICE)
        w2 = (torch.randn(e, hidden, inter, generator=g) / inter**0.5).to(dtype).to(DEVICE)
        s1 = s2 = None
    b1 = torch.randn(e, 2 * inter, generator=g).to(dtype).to(DEVICE)
    b2 = torch.randn(e, hidden, generator=g).to(dtype).to(DEVICE)
    return w1, b1, w2, b2, s1, s2


def _with_config(monkeypatch, **fields):
    from quickmoe.kernels import moe_configs, moe_gemm

    if DEVICE == "cpu":  # K parts in multiples of 64 columns (256 on the GPU): several parts at these small K
        monkeypatch.setattr(moe_gemm, "K_PART_UNIT", 64)

    config = moe_configs.MoEKernelConfig(**{"block_m": 16, "block_n": 32, "block_k": 64, **fields})
    monkeypatch.setattr(moe_configs, "moe_kernel_config", lambda *args, **kwargs: config)
    return config


@pytest.mark.parametrize("k_parts,split_k,hidden,num_tokens", [
    (2, True, 160, 1),  # K = 2.5 units of 64: parts of 128 and 32 columns
    (3, True, 160, 3),  # parts of 64, 64, 32
    (4, True, 96, 2),  # 2 units: parts 2 and 3 are empty
    (2, False, 160, 5),  # one program adds its two parts
    (4, False, 224, 1),  # parts of 64 (one step each), the last of 32
])
@pytest.mark.parametrize("mxfp4", [True, False])
def test_k_parts_match_the_reference(monkeypatch, k_parts, split_k, hidden, num_tokens, mxfp4):
    _with_config(monkeypatch, k_parts=k_parts, split_k=split_k, swap_ab=k_parts == 3)
    g = torch.Generator().manual_seed(k_parts * 11 + split_k + hidden + mxfp4)
    w1, b1, w2, b2, s1, s2 = _experts(8, hidden, 160, mxfp4, torch.float32, g)
    x = torch.randn(num_tokens, hidden, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(num_tokens, 8, generator=g).to(DEVICE), 4)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64)
    got = fused_moe(x, weights, ids, w1, b1, w2, b2, **kw)
    want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1 if mxfp4 else w1.double(), b1.double(),
                         w2 if mxfp4 else w2.double(), b2.double(), **kw)
    assert got.shape == (num_tokens, hidden) and got.dtype == torch.float32
    assert (got.double() - want).norm() / want.norm() < 1e-5


@pytest.mark.parametrize("silu", [False, True])
def test_split_and_unsplit_parts_give_the_same_bits(monkeypatch, silu):
    """The same K parts, added in the same order, by one program or by one per part: bit-identical results
    (on a GPU in bf16, where a different summation order would change roundings)."""
    dtype = torch.bfloat16 if DEVICE == "cuda" else torch.float32
    hidden, inter = (2880, 2880) if DEVICE == "cuda" else (352, 160)  # CPU: steps of 32, parts of 128, 128, 96
    block_k = 256 if DEVICE == "cuda" else 32
    g = torch.Generator().manual_seed(5 + silu)
    w1, b1, w2, b2, s1, s2 = _experts(8, hidden, inter, True, dtype, g)
    x = torch.randn(3, hidden, generator=g).to(dtype).to(DEVICE)
    weights, ids = route_ref(torch.randn(3, 8, generator=g).to(DEVICE), 4)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64, activation="silu" if silu else "swiglu_gpt_oss")
    outs = []
    for split_k in (False, True):
        _with_config(monkeypatch, block_k=block_k, k_parts=4, split_k=split_k)
        outs.append(fused_moe(x, weights, ids, w1, b1, w2, b2, **kw))
    _with_config(monkeypatch, block_k=block_k)
    one_part = fused_moe(x, weights, ids, w1, b1, w2, b2, **kw)
    assert torch.equal(outs[0], outs[1])
    want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1, b1.double(), w2, b2.double(), **kw)
    for out in (*outs, one_part):
        assert (out.double() - want).norm() / want.norm() < (1e-2 if dtype == torch.bfloat16 else 1e-5)


def test_the_finishing_kernels_match_their_references():
    from quickmoe.kernels.moe_split_k import combine_parts, combine_parts_ref, finish_gemm1, finish_gemm1_ref

    g = torch.Generator().manual_seed(3)
    num_tokens, top_k, e, hidden, inter, group = 3, 2, 5, 96, 160, 64  # groups of 64, 64 and a ragged 32
    ids = torch.randint(0, e, (num_tokens, top_k), generator=g).to(DEVICE)
    weights = torch.rand(num_tokens, top_k, generator=g).to(DEVICE)
    parts1 = torch.randn(3, num_tokens * top_k, 2, inter, generator=g).to(DEVICE) * 4
    bias1, scale1 = torch.randn(e, 2 * inter, generator=g).to(DEVICE), torch.rand(e, 2 * inter, generator=g).to(DEVICE)
    for silu, row_scaled in ((False, False), (True, True)):
        got = torch.empty(num_tokens * top_k, inter, device=DEVICE)
        want = torch.empty_like(got)
        args = (ids, bias1, scale1)
        kw = dict(has_bias=True, silu=silu, row_scaled=row_scaled)
        finish_gemm1(parts1, *args, got, group, 7.0, 1.702, **kw)
        finish_gemm1_ref(parts1, *args, want, group, 7.0, 1.702, **kw)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    parts2 = torch.randn(2, num_tokens * top_k, hidden, generator=g).to(DEVICE)
    bias2, scale2 = torch.randn(e, hidden, generator=g).to(DEVICE), torch.rand(e, hidden, generator=g).to(DEVICE)
    half = torch.bfloat16 if DEVICE == "cuda" else torch.float16  # the interpreter truncates to bf16
    for dtype, row_scaled in ((torch.float32, True), (half, False)):
        kw = dict(has_bias=True, row_scaled=row_scaled)
        got = combine_parts(parts2, ids, weights, bias2, scale2, dtype, **kw)
        want = combine_parts_ref(parts2, ids, weights, bias2, scale2, dtype, **kw)
        assert got.dtype == dtype
        torch.testing.assert_close(got.float(), want.float(), rtol=1e-6, atol=1e-6)


def test_a_split_config_needs_parts():
    from quickmoe.errors import ConfigError
    from quickmoe.kernels.moe_configs import MoEKernelConfig

    with pytest.raises(ConfigError, match="split_k = true with k_parts = 1"):
        MoEKernelConfig(split_k=True)
    with pytest.raises(ConfigError, match="'split_k' = 1"):
        MoEKernelConfig(k_parts=2, split_k=1)
