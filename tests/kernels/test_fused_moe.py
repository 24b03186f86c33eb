"""`fused_moe` (Triton; the interpreter on CPU) against `fused_moe_ref` (torch) on fresh random MXFP4 and
dense experts in the grouped kernel layout: hidden sizes that are multiples of 32 but not of 64, a ragged
last gate/up group, experts that get no token, T = 1, top-k = 1 and 4; and the combine kernel against a sum."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from quickmoe.kernels.fused_moe import fused_moe, fused_moe_ref
from quickmoe.kernels.routing import route_ref

pytest.importorskip("triton")
# SwiGLU's sigmoid of a very negative gate overflows exp() to inf in the interpreter's numpy (1 / inf = 0,
# the right limit), which numpy reports as a warning
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _experts(num_experts, hidden, inter, mxfp4, dtype, g):
    def mx(n, k):  # random MXFP4 in kernel layout: blocks [E, n, k/2], scales [E, k/32, n] near 2^0
        blocks = torch.randint(0, 256, (num_experts, n, k // 2), dtype=torch.uint8, generator=g)
        scales = torch.randint(122, 128, (num_experts, k // 32, n), dtype=torch.uint8, generator=g)
        return blocks.to(DEVICE), scales.to(DEVICE)

    if mxfp4:
        (w1, s1), (w2, s2) = mx(2 * inter, hidden), mx(hidden, inter)
    else:
        w1 = (torch.randn(num_experts, 2 * inter, hidden, generator=g) / hidden**0.5).to(dtype).to(DEVICE)
        w2 = (torch.randn(num_experts, hidden, inter, generator=g) / inter**0.5).to(dtype).to(DEVICE)
        s1 = s2 = None
    b1 = torch.randn(num_experts, 2 * inter, generator=g).to(dtype).to(DEVICE)
    b2 = torch.randn(num_experts, hidden, generator=g).to(dtype).to(DEVICE)
    return w1, b1, w2, b2, s1, s2


@pytest.mark.parametrize("mxfp4", [True, False])
@pytest.mark.parametrize("num_tokens,top_k,num_experts,hidden,inter", [
    (1, 4, 8, 96, 96),  # T = 1; H = 96: a multiple of 32, not of 64
    (9, 1, 8, 64, 160),  # top-1; I = 160: groups of 64, 64 and a ragged 32
    (40, 4, 16, 160, 64),  # some experts get no token
])
def test_fused_moe_matches_the_reference(mxfp4, num_tokens, top_k, num_experts, hidden, inter):
    g = torch.Generator().manual_seed(num_tokens * 7 + hidden + inter + mxfp4)
    dtype = torch.float32
    w1, b1, w2, b2, s1, s2 = _experts(num_experts, hidden, inter, mxfp4, dtype, g)
    x = torch.randn(num_tokens, hidden, generator=g).to(dtype).to(DEVICE)
    logits = torch.randn(num_tokens, num_experts, generator=g).to(DEVICE)
    logits[:, num_experts // 2:] -= 100.0  # the upper half of the experts is never chosen
    weights, ids = route_ref(logits, top_k)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64, swiglu_limit=7.0, swiglu_alpha=1.702)
    got = fused_moe(x, weights, ids, w1, b1, w2, b2, **kw)
    want = fused_moe_ref(x.double(), weights.double(), ids.long(),
                         w1 if mxfp4 else w1.double(), b1.double(), w2 if mxfp4 else w2.double(), b2.double(), **kw)
    assert got.shape == (num_tokens, hidden) and got.dtype == dtype
    err = (got.double() - want).norm() / want.norm()
    assert err < 1e-5, err


def test_fused_moe_bf16_activations():
    g = torch.Generator().manual_seed(5)
    w1, b1, w2, b2, s1, s2 = _experts(8, 96, 128, True, torch.bfloat16, g)
    x = torch.randn(12, 96, generator=g).to(torch.bfloat16).to(DEVICE)
    weights, ids = route_ref(torch.randn(12, 8, generator=g).to(DEVICE), 4)
    got = fused_moe(x, weights, ids, w1, b1, w2, b2, w1_scales=s1, w2_scales=s2, gate_up_group=64)
    want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1, b1.double(), w2, b2.double(),
                         w1_scales=s1, w2_scales=s2, gate_up_group=64)
    assert got.dtype == torch.bfloat16
    # Triton's CPU interpreter rounds float32 -> bf16 by truncation (the GPU rounds to nearest), which doubles
    # the rounding error of the bf16 intermediate and output: about 1.0% here against 0.45% for torch in bf16.
    tolerance = 1e-2 if DEVICE == "cuda" else 2e-2
    assert (got.double() - want).norm() / want.norm() < tolerance


def test_fused_moe_needs_the_grouped_layout():
    g = torch.Generator().manual_seed(1)
    w1, b1, w2, b2, _, _ = _experts(4, 64, 64, False, torch.float32, g)
    x = torch.randn(2, 64, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(2, 4, generator=g).to(DEVICE), 2)
    with pytest.raises(ValueError, match="gate_up_group = 1; the kernel needs a power of two >= 16"):
        fused_moe(x, weights, ids, w1, b1, w2, b2, gate_up_group=1)


@pytest.mark.gpu
@pytest.mark.parametrize("forced,num_tokens", [
    *[(forced, t) for forced in (None, (16, False), (32, True)) for t in (1, 16, 256)],
    (None, 64), (None, 128), (None, 700), (None, 1024), (None, 2048), (None, 3000), (None, 8192)])  # tuned tiles:
    # on the H200 the register-operand kernels with two K steps a stage at 64-512 and with one (GEMM 1) at 1,024,
    # Triton's 256-row tiles at 2,048; 8,192
def test_fused_moe_gpt_oss_20b_shapes_on_the_gpu(monkeypatch, num_tokens, forced):
    """gpt-oss-20b layer shapes (H = I = 2880, 32 experts, top-4), MXFP4 weights, bf16 activations: within
    1e-2 (relative, Frobenius) of float64 on the same dequantized weights, with the tuned configs and with
    forced (column tile, orientation) choices."""
    if forced is not None:
        from quickmoe.kernels import moe_configs

        tuned = moe_configs.moe_kernel_config

        def forced_config(*args, **kwargs):  # the plain orientation takes 16-row tiles at least
            config = tuned(*args, **kwargs)
            block_m = config.block_m if forced[1] else max(config.block_m, 16)
            return dataclasses.replace(config, block_m=block_m, block_n=forced[0], swap_ab=forced[1],
                                       register_operand=False)  # the Triton tile forced

        monkeypatch.setattr(moe_configs, "moe_kernel_config", forced_config)
    g = torch.Generator().manual_seed(num_tokens)
    w1, b1, w2, b2, s1, s2 = _experts(32, 2880, 2880, True, torch.bfloat16, g)
    x = torch.randn(num_tokens, 2880, generator=g).to(torch.bfloat16).to(DEVICE)
    weights, ids = route_ref(torch.randn(num_tokens, 32, generator=g).to(DEVICE), 4)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64)
    got = fused_moe(x, weights, ids, w1, b1, w2, b2, **kw)
    want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1, b1.double(), w2, b2.double(), **kw)
    assert (got.double() - want).norm() / want.norm() < 1e-2


def test_fused_moe_never_pads_concatenates_or_copies_activations():
    """The ops fused_moe runs (torch profiler, with input shapes): nothing pads or concatenates, and no
    copying op touches a tensor of an activation's shape ([T, H], [T*k, I], [T*k, H])."""
    from torch.profiler import ProfilerActivity, profile

    g = torch.Generator().manual_seed(9)
    num_tokens, top_k, hidden, inter = 7, 3, 96, 160  # shapes no index tensor shares
    w1, b1, w2, b2, s1, s2 = _experts(8, hidden, inter, True, torch.float32, g)
    x = torch.randn(num_tokens, hidden, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(num_tokens, 8, generator=g).to(DEVICE), top_k)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fused_moe(x, weights, ids, w1, b1, w2, b2, w1_scales=s1, w2_scales=s2, gate_up_group=64)
    events = list(prof.events())
    names = {e.name for e in events}
    assert not names & {"aten::pad", "aten::constant_pad_nd", "aten::cat", "aten::stack"}, names
    activation_shapes = {(num_tokens, hidden), (num_tokens * top_k, inter), (num_tokens * top_k, hidden)}
    copying = {"aten::copy_", "aten::clone", "aten::contiguous", "aten::_to_copy", "aten::index_select",
               "aten::gather", "aten::index"}
    for e in events:
        if e.name in copying:
            shapes = {tuple(s) for s in e.input_shapes if s}
            assert not shapes & activation_shapes, (e.name, e.input_shapes)


@pytest.mark.parametrize("num_tokens,top_k", [(1, 4), (13, 1)])
def test_fused_moe_mxfp8_activations(num_tokens, top_k):
    """MXFP4 weights x MXFP8 activations: the kernels against the reference that rounds the activations
    through the same MXFP8 quantizer (float32 maths, so the two agree to float rounding)."""
    g = torch.Generator().manual_seed(num_tokens + 40)
    w1, b1, w2, b2, s1, s2 = _experts(8, 96, 160, True, torch.float32, g)
    x = torch.randn(num_tokens, 96, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(num_tokens, 8, generator=g).to(DEVICE), top_k)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64, mxfp8_activations=True)
    got = fused_moe(x, weights, ids, w1, b1, w2, b2, **kw)
    want = fused_moe_ref(x, weights, ids.long(), w1, b1, w2, b2, **kw)
    plain = fused_moe_ref(x, weights, ids.long(), w1, b1, w2, b2, w1_scales=s1, w2_scales=s2, gate_up_group=64)
    assert (got - want).norm() / want.norm() < 1e-5
    assert (want - plain).norm() / plain.norm() > 1e-4  # the MXFP8 rounding is really applied


@pytest.mark.parametrize("mxfp4", [True, False])
def test_fused_moe_silu_without_bias(mxfp4):
    """Mixtral / Qwen-MoE experts: SiLU(gate) * up, no biases; softmax-then-top-k routing, renormalized."""
    g = torch.Generator().manual_seed(21 + mxfp4)
    w1, _, w2, _, s1, s2 = _experts(8, 96, 160, mxfp4, torch.float32, g)
    x = torch.randn(11, 96, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(11, 8, generator=g).to(DEVICE), 2, scoring="softmax_topk", renormalize=True)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64, activation="silu")
    got = fused_moe(x, weights, ids, w1, None, w2, None, **kw)
    want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1 if mxfp4 else w1.double(), None,
                         w2 if mxfp4 else w2.double(), None, **kw)
    assert (got.double() - want).norm() / want.norm() < 1e-5
    with pytest.raises(ValueError, match="activation = 'gelu'"):
        fused_moe_ref(x, weights, ids, w1, None, w2, None, w1_scales=s1, w2_scales=s2, activation="gelu")


_TWO_DOTS = [(False, 1, 32, False), (True, 1, 32, False), (False, 3, 16, False), (True, 5, 64, False),
             (False, 1, 16, False)]
_ONE_DOT = [(False, 1, 64, True), (True, 1, 32, True), (False, 3, 16, True)]


# one dot's row mapping does not depend on the format: its cases run on dense experts, one on MXFP4 (the GPU test
# test_gate_up_in_one_dot_gives_the_two_dots_bits runs every format; the interpreter's time is CI's)
@pytest.mark.parametrize("swap_ab,group_m,block_n,one_dot,mxfp4", [
    *[(*case, mxfp4) for case in _TWO_DOTS for mxfp4 in (True, False)],
    *[(*case, False) for case in _ONE_DOT], (True, 1, 32, True, True)])
def test_both_gemm_orientations_match_the_reference(monkeypatch, swap_ab, group_m, block_n, one_dot, mxfp4):
    """The tuned configs choose each GEMM's orientation (activations x weights^T or its transpose), the
    launch order's M-tile groups (here 8 M tiles: groups of 3 and 5 leave a partial last group), the
    column tile (GEMM 1: the gate/up group of 64 or a part of it) and whether GEMM 1 takes its gate and up rows
    in one dot: all give the reference's result, with a ragged last gate/up group (of 32: parts of 16 inside it,
    of 32 filling it, of 64 half past it), a hidden size not a multiple of 64 and idle experts."""
    from quickmoe.kernels import moe_configs

    config = moe_configs.MoEKernelConfig(block_m=16, block_n=block_n, block_k=64, swap_ab=swap_ab, group_m=group_m,
                                         gate_up_one_dot=one_dot)
    monkeypatch.setattr(moe_configs, "moe_kernel_config", lambda *args, **kwargs: config)
    g = torch.Generator().manual_seed(21 + swap_ab + 2 * mxfp4)
    w1, b1, w2, b2, s1, s2 = _experts(8, 96, 160, mxfp4, torch.float32, g)
    x = torch.randn(5, 96, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(5, 8, generator=g).to(DEVICE), 2)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64)
    got = fused_moe(x, weights, ids, w1, b1, w2, b2, **kw)
    want = fused_moe_ref(x, weights, ids.long(), w1, b1, w2, b2, **kw)
    assert (got - want).norm() / want.norm() < 1e-5


@pytest.mark.parametrize("swap_ab,block_n,inter,one_dot", [(False, 32, 160, False), (True, 64, 160, False),
                                                       (True, 64, 128, True), (False, 64, 192, True)])
def test_mxfp4_weight_tiles_by_tma_give_the_pointer_loads_bits(monkeypatch, swap_ab, block_n, inter, one_dot):
    """MXFP4 weight tiles copied through a tensor descriptor of the packed bytes [E * N, K / 2] (`weight_tma`) decode
    to the same weights as the pointer loads: identical outputs, with a ragged last gate/up group (I = 160) and a
    last K step half past H = 96 (its bytes read as zeros, as the masked loads give); with one dot in GEMM 1, a block
    of a group's gate rows then its up rows."""
    from quickmoe.kernels import moe_configs

    g = torch.Generator().manual_seed(31 + swap_ab + inter)
    w1, b1, w2, b2, s1, s2 = _experts(8, 96, inter, True, torch.float32, g)
    x = torch.randn(7, 96, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(7, 8, generator=g).to(DEVICE), 2)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64)
    outs = []
    for tma in (False, True):
        config = moe_configs.MoEKernelConfig(block_m=16, block_n=block_n, block_k=64, swap_ab=swap_ab, weight_tma=tma,
                                             gate_up_one_dot=one_dot)
        monkeypatch.setattr(moe_configs, "moe_kernel_config", lambda *args, c=config, **kwargs: c)
        outs.append(fused_moe(x, weights, ids, w1, b1, w2, b2, **kw))
    want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1, b1.double(), w2, b2.double(), **kw)
    assert torch.equal(outs[0], outs[1])
    assert (outs[1].double() - want).norm() / want.norm() < 1e-5


@pytest.mark.parametrize("mxfp4,swap_ab", [(True, False), (False, False), (True, True)])
def test_partial_tiles_take_the_quarter_tile_path_and_match_the_reference(monkeypatch, mxfp4, swap_ab):
    """Prefill-sized tiles (BLOCK_M 64 here) run an expert's last tile on a quarter of its rows when its valid
    rows fit there (`SUB_TILE_MIN_BLOCK_M`): runs that end exactly at 16 rows (the limit) and one past it, at 32,
    33 and 64, runs of several tiles whose last holds 9 or 40 rows, and an idle expert, in one launch; each row
    must be the reference's, in either orientation (the tuned prefill tiles of gpt-oss-20b are transposed)."""
    from quickmoe.kernels import moe_configs, moe_gemm

    config = moe_configs.MoEKernelConfig(block_m=64, block_n=64, block_k=64, num_warps=4, group_m=2,
                                         swap_ab=swap_ab)
    monkeypatch.setattr(moe_configs, "moe_kernel_config", lambda *args, **kwargs: config)
    monkeypatch.setattr(moe_gemm, "SUB_TILE_MIN_ASSIGNMENTS", 0)  # sub-tiles for this small prefill-like launch
    counts = [7, 16, 17, 32, 33, 64, 0, 64 + 9, 128 + 40]  # assignments per expert
    g = torch.Generator().manual_seed(77 + mxfp4)
    flat = torch.cat([torch.full((c,), e) for e, c in enumerate(counts)])
    flat = flat[torch.randperm(flat.numel(), generator=g)]  # [A], A even
    top_k, num_tokens = 2, flat.numel() // 2
    ids = flat.reshape(num_tokens, top_k).to(torch.int32).to(DEVICE)
    weights = torch.rand(num_tokens, top_k, generator=g).to(DEVICE)
    w1, b1, w2, b2, s1, s2 = _experts(len(counts), 64, 64, mxfp4, torch.float32, g)
    x = torch.randn(num_tokens, 64, generator=g).to(DEVICE)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64)
    got = fused_moe(x, weights, ids, w1, b1, w2, b2, **kw)
    want = fused_moe_ref(x, weights, ids.long(), w1, b1, w2, b2, **kw)
    row_error = ((got.double() - want.double()).norm(dim=1) / want.double().norm(dim=1))  # [T]
    assert row_error.max() < 1e-5, f"{int((row_error > 1e-5).sum())} of {num_tokens} tokens differ"


def test_only_prefill_sized_launches_of_large_tiles_take_sub_tiles():
    """Decode launches (A < SUB_TILE_MIN_ASSIGNMENTS) compile the GEMMs without the sub-tile branch (it cost the
    20b's batch-256 step 2% on the H100), and so do tiles under SUB_TILE_MIN_BLOCK_M rows."""
    from quickmoe.kernels.moe_align import MoEAlignment
    from quickmoe.kernels.moe_gemm import SUB_TILE_MIN_ASSIGNMENTS, SUB_TILE_MIN_BLOCK_M, _sub_tiles

    def align(num_assignments, block_m):
        empty = torch.empty(0, dtype=torch.int32)
        return MoEAlignment(empty, empty, empty, block_m=block_m, num_assignments=num_assignments)

    assert _sub_tiles(align(SUB_TILE_MIN_ASSIGNMENTS, SUB_TILE_MIN_BLOCK_M))
    assert _sub_tiles(align(32768, 128))
    assert not _sub_tiles(align(SUB_TILE_MIN_ASSIGNMENTS - 1, 128))
    assert not _sub_tiles(align(1024, 64))  # gpt-oss-20b's batch-256 decode
    assert not _sub_tiles(align(2048, 64))  # Qwen3-30B-A3B's batch-256 decode
    assert not _sub_tiles(align(32768, SUB_TILE_MIN_BLOCK_M // 2))


@pytest.mark.parametrize("mxfp4", [True, False])
@pytest.mark.parametrize("top_k,swap_ab", [(4, True), (4, False), (1, True)])
def test_one_token_needs_no_alignment_launch_and_gives_the_aligned_bits(monkeypatch, mxfp4, top_k, swap_ab):
    """T = 1 (every MoE layer of a batch-1 decode step) takes `single_token_alignment`: no alignment kernel (moe_align
    replaced by one that fails), each GEMM's output bit-identical to the same GEMM over `moe_align`'s sorted tiles,
    the layer equal to the float64 reference; a repeated expert (expert parallel maps other ranks' assignments to
    expert 0, weight 0) too."""
    from quickmoe.kernels import moe_align as align_module
    from quickmoe.kernels import moe_configs
    from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu, moe_gemm2

    config = moe_configs.MoEKernelConfig(block_m=16, block_n=32, block_k=64, swap_ab=swap_ab)
    monkeypatch.setattr(moe_configs, "moe_kernel_config", lambda *args, **kwargs: config)
    g = torch.Generator().manual_seed(5 + top_k + 2 * swap_ab + 4 * mxfp4)
    w1, b1, w2, b2, s1, s2 = _experts(8, 96, 160, mxfp4, torch.float32, g)
    x = torch.randn(1, 96, generator=g).to(DEVICE)
    for ids in (torch.randperm(8, generator=g)[:top_k], torch.tensor([0, 0, 3, 0][:top_k])):
        ids = ids.to(torch.int32).reshape(1, top_k).to(DEVICE)
        weights = torch.rand(1, top_k, generator=g).to(DEVICE)
        one = align_module.single_token_alignment(ids, config.block_m)
        sorted_tiles = align_module.moe_align(ids, 8, config.block_m)
        inter = [moe_gemm1_swiglu(x, a, top_k, w1, b1, s1, 64, 7.0, 1.702, config=config) for a in (one, sorted_tiles)]
        assert torch.equal(inter[0], inter[1])
        out = [moe_gemm2(inter[0], a, weights, w2, b2, s2, config=config) for a in (one, sorted_tiles)]
        assert torch.equal(out[0], out[1])
        kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64)
        with monkeypatch.context() as m:
            m.setattr(align_module, "moe_align", lambda *args: pytest.fail("moe_align ran for one token"))
            got = fused_moe(x, weights, ids, w1, b1, w2, b2, **kw)
        want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1 if mxfp4 else w1.double(), b1.double(),
                             w2 if mxfp4 else w2.double(), b2.double(), **kw)
        assert (got.double() - want).norm() / want.norm() < 1e-5
    with pytest.raises(ValueError, match=r"\[1, k\]"):
        align_module.single_token_alignment(torch.zeros(2, top_k, dtype=torch.int32), 16)


@pytest.mark.parametrize("mxfp4", [True, False])
@pytest.mark.parametrize("num_tokens", [1, 5])
def test_eight_row_tiles_of_the_transposed_orientation_match_the_reference(monkeypatch, mxfp4, num_tokens):
    """In the transposed orientation the assignments are the tensor-core instruction's 8-wide side, so a tile may
    hold 8 of them (half a 16-row tile's padding at T = 1-8): both GEMMs give the float64 reference's result, one
    token (no alignment launch) and five (sorted tiles, an expert with two assignments), idle experts. The plain
    orientation keeps 16 (its assignments are the instruction's 16-row side)."""
    from quickmoe.errors import ConfigError
    from quickmoe.kernels import moe_configs

    config = moe_configs.MoEKernelConfig(block_m=8, block_n=32, block_k=64, num_warps=2, swap_ab=True)
    monkeypatch.setattr(moe_configs, "moe_kernel_config", lambda *args, **kwargs: config)
    g = torch.Generator().manual_seed(31 + num_tokens + 2 * mxfp4)
    w1, b1, w2, b2, s1, s2 = _experts(8, 96, 160, mxfp4, torch.float32, g)
    x = torch.randn(num_tokens, 96, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(num_tokens, 8, generator=g).to(DEVICE), 4)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64)
    got = fused_moe(x, weights, ids, w1, b1, w2, b2, **kw)
    want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1 if mxfp4 else w1.double(), b1.double(),
                         w2 if mxfp4 else w2.double(), b2.double(), **kw)
    assert (got.double() - want).norm() / want.norm() < 1e-5
    with pytest.raises(ConfigError, match=r"block_m must be >= 16 \(>= 8 with swap_ab\)"):
        moe_configs.MoEKernelConfig(block_m=8, swap_ab=False)


def _spy_on_parts(monkeypatch) -> list[int]:
    """Record the part counts the GEMM launches take."""
    from quickmoe.kernels import moe_gemm

    seen = []
    real = moe_gemm._split_parts

    def spy(*args):
        parts, k_part = real(*args)
        seen.append(parts)
        return parts, k_part

    monkeypatch.setattr(moe_gemm, "_split_parts", spy)
    return seen


@pytest.mark.parametrize("mxfp4,num_tokens,split,block_m,swap_ab", [
    (True, 1, 2, 8, True), (False, 1, 2, 8, True), (True, 5, 3, 8, True), (False, 6, 4, 16, False)])
def test_k_in_parts_match_the_reference(monkeypatch, mxfp4, num_tokens, split, block_m, swap_ab):
    """K in parts (`split_k`): each output tile's programs sum a run of the K steps, the last to finish adds the
    parts and runs the epilogue (bias, SwiGLU, routing weight). Both GEMMs against the float64 reference, with H =
    128 (4 K steps of 32: 2 or 4 parts) and I = 192 (6 steps: 2 or 3 parts; three gate/up groups), both
    orientations; the launches really ran in parts, and the ticket counters are back to zero afterwards (the next
    call's tiles start from them)."""
    from quickmoe.kernels import moe_configs
    from quickmoe.kernels.tickets import ticket_counters

    config = moe_configs.MoEKernelConfig(block_m=block_m, block_n=32, block_k=32, num_warps=2, swap_ab=swap_ab,
                                         split_k=split)
    monkeypatch.setattr(moe_configs, "moe_kernel_config", lambda *args, **kwargs: config)
    parts = _spy_on_parts(monkeypatch)
    g = torch.Generator().manual_seed(71 + num_tokens + split + mxfp4)
    w1, b1, w2, b2, s1, s2 = _experts(8, 128, 192, mxfp4, torch.float32, g)
    x = torch.randn(num_tokens, 128, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(num_tokens, 8, generator=g).to(DEVICE), 4 if num_tokens == 1 else 2)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64, swiglu_limit=7.0, swiglu_alpha=1.702)
    calls = 2 if num_tokens == 1 else 1  # a second call starts from the counters the first left
    for _ in range(calls):
        got = fused_moe(x, weights, ids, w1, b1, w2, b2, **kw)
        want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1 if mxfp4 else w1.double(), b1.double(),
                             w2 if mxfp4 else w2.double(), b2.double(), **kw)
        assert (got.double() - want).norm() / want.norm() < 1e-5
    assert parts == [{2: 2, 3: 2, 4: 4}[split], {2: 2, 3: 3, 4: 3}[split]] * calls
    for name in ("moe_gemm1", "moe_gemm2"):
        assert not ticket_counters(torch.device(DEVICE), name).any()


def test_k_parts_divide_the_k_steps():
    """The part count is the largest up to split_k that divides the K steps (a ragged last step counts); launches
    with prefill sub-tiles take one part."""
    from quickmoe.kernels.moe_align import MoEAlignment
    from quickmoe.kernels.moe_configs import MoEKernelConfig
    from quickmoe.kernels.moe_gemm import SUB_TILE_MIN_ASSIGNMENTS, _split_parts

    def align(num_assignments, block_m):
        empty = torch.zeros(1, dtype=torch.int32)
        return MoEAlignment(empty, empty, empty, block_m, num_assignments)

    decode = align(4, 8)
    for k, block_k, split_k, want in ((2880, 256, 4, (4, 768)), (2880, 256, 5, (4, 768)), (2880, 256, 1, (1, 3072)),
                                      (2048, 128, 3, (2, 1024)), (768, 128, 4, (3, 256)), (768, 128, 16, (6, 128)),
                                      (4096, 128, 4, (4, 1024))):
        assert _split_parts(MoEKernelConfig(block_m=8, swap_ab=True, block_k=block_k, split_k=split_k), k, 100,
                            decode) == want, (k, block_k, split_k)
    prefill = align(SUB_TILE_MIN_ASSIGNMENTS, 64)
    assert _split_parts(MoEKernelConfig(block_m=64, block_k=128, split_k=4), 2048, 100, prefill) == (1, 2048)


def _model_sized_gemm_inputs(fmt: str, num_tokens: int, seed: int):
    """gpt-oss-20b's experts (MXFP4, bf16) or Qwen3-30B-A3B's (FP8, NVFP4) on the GPU, and fresh random inputs of
    both GEMMs (FP8: quantized per token and 128 columns) -> a function of a MoEKernelConfig that runs GEMM 1 and
    GEMM 2 on them (aligned for its block_m; bf16 outputs)."""
    from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
    from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu, moe_gemm2

    spec = SHAPES["gpt-oss-20b" if fmt in ("mxfp4", "bf16") else "qwen3-30b-a3b"]
    g = torch.Generator().manual_seed(seed)
    experts = make_experts(spec, fmt, torch.device("cuda"), g)
    quantize = quantize_fp8_per_token_group if fmt == "fp8" else (lambda t: (t, None))
    acts, act_scales = quantize(torch.randn(num_tokens, spec.hidden, generator=g).to(torch.bfloat16).cuda())
    weights, ids = route_ref(torch.randn(num_tokens, spec.experts, generator=g).cuda(), spec.top_k)
    inter = torch.randn(num_tokens * spec.top_k, spec.inter, generator=g).to(torch.bfloat16).cuda()
    inter, inter_scales = quantize(inter)

    def both(config):
        align = moe_align(ids, spec.experts, config.block_m)
        return (moe_gemm1_swiglu(acts, align, spec.top_k, experts.w1, experts.b1, experts.kwargs.get("w1_scales"),
                                 GROUP, 7.0, 1.702, act_scales=act_scales, out_dtype=torch.bfloat16, config=config,
                                 activation=spec.activation, w1_row_scale=experts.kwargs.get("w1_row_scale")),
                moe_gemm2(inter, align, weights, experts.w2, experts.b2, experts.kwargs.get("w2_scales"),
                          act_scales=inter_scales, out_dtype=torch.bfloat16, config=config,
                          w2_row_scale=experts.kwargs.get("w2_row_scale")))

    return both


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="tensor-core bits: the GPU")
@pytest.mark.parametrize("fmt", ["mxfp4", "bf16", "fp8", "nvfp4"])
@pytest.mark.parametrize("num_tokens", [1, 8])
def test_k_in_parts_on_the_gpu_are_deterministic_and_near_one_part(fmt, num_tokens):
    """On model-sized experts (gpt-oss-20b MXFP4 and bf16, Qwen3-30B-A3B FP8 and NVFP4) both GEMMs in 2 and 4 parts
    give the same bits on every call (the parts are added in a fixed order whichever program finishes last),
    within bf16 rounding of the one-part result, and an 8-row tile's rows get the bits of a 16-row tile's in the
    same parts (a request's tokens do not depend on its batch's tiles)."""
    from quickmoe.kernels.moe_configs import MoEKernelConfig
    from quickmoe.kernels.tickets import ticket_counters

    both = _model_sized_gemm_inputs(fmt, num_tokens, 5 + num_tokens)

    def run(block_m, split):
        return both(MoEKernelConfig(block_m=block_m, block_n=64 if block_m == 8 else 32,
                                    block_k=128 if fmt == "fp8" else 256, num_warps=4 if block_m == 8 else 2,
                                    num_stages=3, swap_ab=True, split_k=split))

    one = run(8, 1)
    for split in (2, 4):
        first, again, sixteen = run(8, split), run(8, split), run(16, split)
        for which in range(2):
            a, b, c, ref = first[which].float(), again[which].float(), sixteen[which].float(), one[which].float()
            assert torch.equal(a, b), f"gemm {which + 1}, {split} parts: two calls differ"
            assert torch.equal(a, c), f"gemm {which + 1}, {split} parts: 8- and 16-row tiles differ"
            assert ref.abs().max() > 0 and (a - ref).norm() / ref.norm() < 1e-2
    for name in ("moe_gemm1", "moe_gemm2"):
        assert not ticket_counters(torch.device("cuda"), name).any()


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="tensor-core bits: the GPU")
@pytest.mark.parametrize("fmt", ["mxfp4", "bf16", "fp8", "nvfp4"])
@pytest.mark.parametrize("num_tokens", [1, 3, 8, 40])
@pytest.mark.parametrize("block_n,warps", [(32, 2), (64, 4)])
def test_eight_row_tiles_give_the_sixteen_row_tiles_bits(fmt, num_tokens, block_n, warps):
    """A row's output is the same chain of tensor-core steps over K whether its tile holds 8 assignments or 16
    (the instruction's 8-wide side once or twice), so both GEMMs give bit-identical outputs, which keeps a
    request's tokens independent of the batch it shares a step with: gpt-oss-20b's MXFP4 and bf16 experts,
    Qwen3-30B-A3B's FP8 and NVFP4 ones; 8-row tiles of 32 columns on 2 warps and of 64 on 4 (mma.sync, as the
    tuned decode tiles) against the 16-row tile of 32 columns on 2 warps. (16 rows of 64 columns on 4 warps
    take wgmma, whose sums may round otherwise: not a decode tile.)"""
    from quickmoe.kernels.moe_configs import MoEKernelConfig

    both = _model_sized_gemm_inputs(fmt, num_tokens, num_tokens)
    outs = [both(MoEKernelConfig(block_m=block_m, block_n=n, block_k=128 if fmt == "fp8" else 256, num_warps=w,
                                 num_stages=3, swap_ab=True))
            for block_m, n, w in ((8, block_n, warps), (16, 32, 2))]
    for which, (a, b) in enumerate(zip(*outs), start=1):
        assert a.abs().max() > 0
        assert torch.equal(a, b), f"gemm {which}: {int((a != b).sum())} of {a.numel()} outputs differ"


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="tensor-core bits: the GPU")
@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
@pytest.mark.parametrize("num_tokens,block_m,block_n,block_k,swap_ab,one_dot,maxnreg",
                         [(64, 8, 64, 256, True, False, 96), (256, 64, 128, 64, False, True, 168),
                          (1024, 128, 64, 64, True, False, 104), (1024, 128, 64, 64, False, False, 168)])
def test_a_register_cap_gives_the_uncapped_bits(fmt, num_tokens, block_m, block_n, block_k, swap_ab, one_dot,
                                                maxnreg):
    """A cap on the registers per thread (`MoEKernelConfig.maxnreg`) changes where ptxas keeps values (spilling
    some to local memory), not the instructions that compute them: both GEMMs give the uncapped launch's bits, in
    the decode and prefill tiles the caps were measured on (gpt-oss-20b's MXFP4 experts, Qwen3-30B-A3B's NVFP4)."""
    from quickmoe.kernels.moe_configs import MoEKernelConfig

    both = _model_sized_gemm_inputs(fmt, num_tokens, num_tokens + maxnreg)
    outs = [both(MoEKernelConfig(block_m=block_m, block_n=block_n, block_k=block_k, num_warps=4, num_stages=3,
                                 swap_ab=swap_ab, gate_up_one_dot=one_dot, maxnreg=cap)) for cap in (0, maxnreg)]
    for which, (a, b) in enumerate(zip(*outs), start=1):
        assert a.abs().max() > 0
        assert torch.equal(a, b), f"gemm {which}: {int((a != b).sum())} of {a.numel()} outputs differ"


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="tensor-core bits: the GPU")
@pytest.mark.parametrize("num_tokens,block_n,maxnreg", [(2048, 128, 168), (1024, 64, 160)])
def test_a_register_cap_gives_the_uncapped_bits_fp8_prefill(num_tokens, block_n, maxnreg):
    """Qwen3-30B-A3B's FP8 prefill tiles (64 rows, 4 warps, 3 stages, weights by TMA, as the H200 files' keys 1,024
    to 8,192) under a register cap: both GEMMs give the uncapped launch's bits."""
    from quickmoe.kernels.moe_configs import MoEKernelConfig

    both = _model_sized_gemm_inputs("fp8", num_tokens, num_tokens + maxnreg)
    outs = [both(MoEKernelConfig(block_m=64, block_n=block_n, block_k=128, num_warps=4, num_stages=3, group_m=8,
                                 weight_tma=True, maxnreg=cap)) for cap in (0, maxnreg)]
    for which, (a, b) in enumerate(zip(*outs), start=1):
        assert a.abs().max() > 0
        assert torch.equal(a, b), f"gemm {which}: {int((a != b).sum())} of {a.numel()} outputs differ"


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="tensor-core bits: the GPU")
@pytest.mark.parametrize("fmt", ["mxfp4", "bf16", "fp8", "nvfp4"])
@pytest.mark.parametrize("block_m,block_n,swap_ab,warps", [(16, 32, True, 2), (64, 64, False, 4),
                                                           (128, 64, False, 4), (128, 32, False, 8)])
def test_gate_up_in_one_dot_gives_the_two_dots_bits(fmt, block_m, block_n, swap_ab, warps):
    """GEMM 1 with the gate and up rows in one dot of 2 x block_n rows computes each output as the same sum over K
    in the same tensor-core steps as two dots of block_n: bit-identical outputs, MXFP4 and bf16 on gpt-oss-20b-shaped
    experts, FP8 and NVFP4 on Qwen3-30B-A3B-shaped ones, in decode and prefill tiles."""
    from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
    from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_configs import MoEKernelConfig
    from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu

    spec = SHAPES["gpt-oss-20b" if fmt in ("mxfp4", "bf16") else "qwen3-30b-a3b"]
    g = torch.Generator().manual_seed(block_m + block_n)
    experts = make_experts(spec, fmt, torch.device("cuda"), g)
    x = torch.randn(300, spec.hidden, generator=g).to(torch.bfloat16).cuda()
    acts, act_scales = quantize_fp8_per_token_group(x) if fmt == "fp8" else (x, None)
    _, ids = route_ref(torch.randn(300, spec.experts, generator=g).cuda(), spec.top_k)
    align = moe_align(ids, spec.experts, block_m)
    out = []
    for one_dot in (False, True):
        config = MoEKernelConfig(block_m=block_m, block_n=block_n, block_k=128, num_warps=warps, num_stages=3,
                                 swap_ab=swap_ab, gate_up_one_dot=one_dot)
        out.append(moe_gemm1_swiglu(acts, align, spec.top_k, experts.w1, experts.b1, experts.kwargs.get("w1_scales"),
                                    GROUP, 7.0, 1.702, act_scales=act_scales, out_dtype=torch.bfloat16,
                                    config=config, activation=spec.activation,
                                    w1_row_scale=experts.kwargs.get("w1_row_scale")))
    assert out[0].abs().max() > 0
    assert torch.equal(out[0], out[1]), f"{int((out[0] != out[1]).sum())} of {out[0].numel()} outputs differ"


@pytest.mark.parametrize("mxfp4", [True, False])
@pytest.mark.parametrize("num_tokens", [1, 3, 40])
def test_absent_experts_contribute_nothing(mxfp4, num_tokens, monkeypatch):
    """Expert parallel: an id equal to E (another rank's assignment) contributes nothing whatever its weight: the
    result is the float64 reference run as such assignments were before (expert 0, weight 0); with combine False
    the other rows sum to it (absent rows are undefined: only padding rows, all absent, are left so). No GEMM tile
    is given them: every tile the GEMMs' alignment uses is of an expert below E, at T = 1 too (the single-token
    alignment's tiles are the ids themselves). GEMM 2 writes no row of theirs, so the combine must not read them:
    here they are NaN after GEMM 2 (what an uninitialised row may hold)."""
    from quickmoe.kernels import moe_gemm

    aligns = []
    gemm1, gemm2 = moe_gemm.moe_gemm1_swiglu, moe_gemm.moe_gemm2

    def poisoned_gemm2(*args, **kwargs):
        out = gemm2(*args, **kwargs)  # [A, H]
        out[(ids == num_experts).reshape(-1)] = float("nan")
        return out

    monkeypatch.setattr(moe_gemm, "moe_gemm1_swiglu", lambda acts, align, *a, **k: aligns.append(align) or
                        gemm1(acts, align, *a, **k))
    monkeypatch.setattr(moe_gemm, "moe_gemm2", poisoned_gemm2)
    g = torch.Generator().manual_seed(31 + num_tokens + 2 * mxfp4)
    num_experts, hidden, inter, top_k = 8, 96, 64, 4
    w1, b1, w2, b2, s1, s2 = _experts(num_experts, hidden, inter, mxfp4, torch.float32, g)
    x = torch.randn(num_tokens, hidden, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(num_tokens, num_experts, generator=g).to(DEVICE), top_k)
    absent = torch.rand(num_tokens, top_k, generator=g).to(DEVICE) < 0.5  # [T, k]
    absent[0, 0], absent[-1, -1] = True, False
    ids = torch.where(absent, num_experts, ids).to(torch.int32)  # weights stay non-zero: they must not count
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64, swiglu_limit=7.0, swiglu_alpha=1.702)
    got = fused_moe(x, weights, ids, w1, b1, w2, b2, absent_experts=True, **kw)
    assert bool(torch.isfinite(got).all())
    as_before = fused_moe_ref(x.double(), torch.where(absent, 0.0, weights).double(),
                              torch.where(absent, 0, ids).long(), w1 if mxfp4 else w1.double(), b1.double(),
                              w2 if mxfp4 else w2.double(), b2.double(), **kw)
    assert (got.double() - as_before).norm() / as_before.norm() < 1e-5
    ref = fused_moe_ref(x.double(), weights.double(), ids.long(), w1 if mxfp4 else w1.double(), b1.double(),
                        w2 if mxfp4 else w2.double(), b2.double(), absent_experts=True, **kw)
    assert (ref - as_before).abs().max() < 1e-12
    rows = fused_moe(x, weights, ids, w1, b1, w2, b2, absent_experts=True, combine=False, **kw)  # [T, k, H]
    rows = rows.masked_fill(absent[..., None], 0)  # absent rows: undefined (no tile writes them)
    assert bool((rows[~absent] != 0).any())
    assert (rows.double().sum(1) - got.double()).abs().max() < 1e-4
    for align in aligns:
        tiles = align.block_expert[:int(align.num_padded.item()) // align.block_m]
        assert bool(((tiles >= 0) & (tiles < num_experts)).all()), tiles
