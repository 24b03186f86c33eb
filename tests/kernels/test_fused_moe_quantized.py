"""`fused_moe` (Triton; Triton's interpreter on CPU) with NVFP4 and FP8 block-scaled experts against
`fused_moe_ref`, and the FP8 per-token-group activation quantizer against its reference (bit-exact).

NVFP4 is weight-only (decoded in the kernel, the per-row global scale after the K loop): the reference on the
same kernel layout. FP8 multiplies e4m3 weights by e4m3 activations quantized per token and 128 columns: the
reference rounds the activations through the same quantizer (fp8_activations=True). In the interpreter the
dots run on float32 operands (exact products); the GPU path (e4m3 tensor-core dots, PTX decode) is marked gpu."""

from __future__ import annotations

import pytest
import torch

from quickmoe.kernels.fp8_quant import (
    MIN_VALUES_PER_THREAD,
    launch_tile,
    quantize_fp8_per_token_group,
    quantize_fp8_per_token_group_ref,
)
from quickmoe.kernels.fused_moe import fused_moe, fused_moe_ref
from quickmoe.kernels.routing import route_ref

pytest.importorskip("triton")
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _nvfp4_experts(e: int, hidden: int, inter: int, g: torch.Generator):
    def nv(n, k):  # kernel layout: packed [E, n, k/2], E4M3 scales [E, k/16, n] (varied, subnormals too), rows
        packed = torch.randint(0, 256, (e, n, k // 2), dtype=torch.uint8, generator=g)
        scale_bytes = torch.randint(0, 0x50, (e, k // 16, n), dtype=torch.uint8, generator=g)  # 0 .. 2^3
        row = torch.rand(e, n, generator=g) * k ** -0.5
        return packed.to(DEVICE), scale_bytes.view(torch.float8_e4m3fn).to(DEVICE), row.to(DEVICE)

    (w1, s1, r1), (w2, s2, r2) = nv(2 * inter, hidden), nv(hidden, inter)
    return w1, w2, dict(w1_scales=s1, w2_scales=s2, w1_row_scale=r1, w2_row_scale=r2)


def _fp8_experts(e: int, hidden: int, inter: int, g: torch.Generator, scale_rows: tuple[int, int] = (1, 1)):
    def fp8(n, k, rows):  # e4m3 [E, n, k] and scales [E, k/128, n/rows]: one per `rows` kernel rows
        q = (torch.randn(e, n, k, generator=g) * 32).clamp(-448, 448).to(torch.float8_e4m3fn)
        scales = (torch.rand(e, k // 128, n // rows, generator=g) + 0.5) * k ** -0.5 / 32
        return q.to(DEVICE), scales.to(DEVICE)

    (w1, s1), (w2, s2) = fp8(2 * inter, hidden, scale_rows[0]), fp8(hidden, inter, scale_rows[1])
    return w1, w2, dict(w1_scales=s1, w2_scales=s2)


@pytest.mark.parametrize("num_tokens,top_k,num_experts,hidden,inter,one_dot", [
    (1, 2, 8, 96, 96, False),  # T = 1; H = 96: six NVFP4 blocks per row
    (13, 3, 8, 64, 160, False),  # a ragged last gate/up group
    (40, 2, 16, 128, 64, False),  # experts without tokens
    (13, 3, 8, 64, 160, True),  # GEMM 1's gate and up rows in one dot, with the ragged group
])
def test_nvfp4_experts_match_the_reference(monkeypatch, num_tokens, top_k, num_experts, hidden, inter, one_dot):
    from quickmoe.kernels import moe_configs

    if one_dot:
        config = moe_configs.MoEKernelConfig(block_m=16, block_n=64, block_k=64, gate_up_one_dot=True)
        monkeypatch.setattr(moe_configs, "moe_kernel_config", lambda *args, **kwargs: config)
    g = torch.Generator().manual_seed(num_tokens + hidden)
    w1, w2, kw = _nvfp4_experts(num_experts, hidden, inter, g)
    x = torch.randn(num_tokens, hidden, generator=g).to(DEVICE)
    logits = torch.randn(num_tokens, num_experts, generator=g).to(DEVICE)
    logits[:, num_experts // 2:] -= 100.0  # half of the experts never chosen
    weights, ids = route_ref(logits, top_k, scoring="softmax_topk", renormalize=True)
    kw.update(gate_up_group=64, activation="silu")
    got = fused_moe(x, weights, ids, w1, None, w2, None, **kw)
    want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1, None, w2, None, **kw)
    assert torch.isfinite(want).all() and want.std() > 0
    assert (got.double() - want).norm() / want.norm() < 1e-5


@pytest.mark.parametrize("num_tokens,top_k,swap_ab,block_n,one_dot", [
    (1, 2, False, 32, False), (9, 2, True, 32, False), (33, 1, False, 32, False), (9, 2, False, 32, True)])
def test_fp8_experts_match_the_reference_with_fp8_activations(monkeypatch, num_tokens, top_k, swap_ab, block_n,
                                                              one_dot):
    """FP8 experts with FP8 activations against the reference that quantizes the activations the same way. The
    tiles stay under 64 weight rows a dot, where the H100 runs FP8 mma.sync (float32 sums): 64-row dots with
    swap_ab take wgmma, whose FP8 sums keep fewer bits (4e-3 relative here at block_n 32 with one dot: 64 rows;
    scripts/probes/fp8_mma_kind_probe.py; the model-sized GPU tests below bound that path)."""
    from quickmoe.kernels import fused_moe as fused_moe_module, moe_configs

    config = moe_configs.MoEKernelConfig(block_m=16, block_n=block_n, block_k=64, swap_ab=swap_ab,
                                         gate_up_one_dot=one_dot)
    monkeypatch.setattr(moe_configs, "moe_kernel_config", lambda *args, **kwargs: config)
    monkeypatch.setattr(fused_moe_module, "fp8_gemv_max_tokens", lambda device: 0)  # the tensor-core GEMMs at T = 1
    g = torch.Generator().manual_seed(num_tokens * 3 + top_k)
    w1, w2, kw = _fp8_experts(8, 256, 384, g)  # whole 128-column scale groups (the model requires them)
    x = torch.randn(num_tokens, 256, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(num_tokens, 8, generator=g).to(DEVICE), top_k, scoring="softmax_topk",
                             renormalize=True)
    kw.update(gate_up_group=64, activation="silu")
    got = fused_moe(x, weights, ids, w1, None, w2, None, **kw)
    want = fused_moe_ref(x, weights, ids.long(), w1, None, w2, None, fp8_activations=True, **kw)
    plain = fused_moe_ref(x, weights, ids.long(), w1, None, w2, None, **kw)
    assert (got - want).norm() / want.norm() < 1e-5
    assert (want - plain).norm() / plain.norm() > 1e-3  # the activations really went through FP8
    with pytest.raises(NotImplementedError, match="FP8 activations"):
        fused_moe(x, weights, ids, w1.float(), None, w2.float(), None, gate_up_group=64, fp8_activations=True)


@pytest.mark.parametrize("scale_rows,swap_ab,block_n,one_dot", [
    ((64, 128), False, 32, False),  # one scale per tile in both GEMMs (R a multiple of BLOCK_N)
    ((32, 32), True, 32, False),  # R = BLOCK_N, the swapped orientation
    ((16, 64), False, 32, False),  # GEMM 1: R < BLOCK_N, a scale per row of the tile
    ((64, 128), False, 32, True),  # one dot of gate and up rows: two scales a tile
])
def test_fp8_experts_with_a_scale_per_block_of_rows(monkeypatch, scale_rows, swap_ab, block_n, one_dot):
    """Scales shared by R kernel rows (a block-scaled checkpoint's blocks, `layouts.quantized_moe`) give the
    reference's result and exactly the bits of the same scales repeated per row (R = 1): one scale per tile
    multiplies the same floats."""
    from quickmoe.kernels import moe_configs

    config = moe_configs.MoEKernelConfig(block_m=16, block_n=block_n, block_k=64, swap_ab=swap_ab,
                                         gate_up_one_dot=one_dot)
    monkeypatch.setattr(moe_configs, "moe_kernel_config", lambda *args, **kwargs: config)
    g = torch.Generator().manual_seed(sum(scale_rows) + block_n + swap_ab)
    w1, w2, kw = _fp8_experts(4, 128, 128, g, scale_rows)  # one 128-column step in each GEMM
    per_row = dict(w1_scales=kw["w1_scales"].repeat_interleave(scale_rows[0], dim=2),
                   w2_scales=kw["w2_scales"].repeat_interleave(scale_rows[1], dim=2))
    x = torch.randn(9, 128, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(9, 4, generator=g).to(DEVICE), 2, scoring="softmax_topk",
                             renormalize=True)
    common = dict(gate_up_group=64, activation="silu")
    got = fused_moe(x, weights, ids, w1, None, w2, None, **kw, **common)
    assert torch.equal(got, fused_moe(x, weights, ids, w1, None, w2, None, **per_row, **common))
    want = fused_moe_ref(x, weights, ids.long(), w1, None, w2, None, fp8_activations=True, **kw, **common)
    assert torch.equal(want, fused_moe_ref(x, weights, ids.long(), w1, None, w2, None, fp8_activations=True,
                                           **per_row, **common))
    assert (got - want).norm() / want.norm() < 1e-5


@pytest.mark.parametrize("fmt,swap_ab,block_n,inter,group,one_dot", [
    ("fp8", False, 32, 384, 64, False), ("fp8", True, 32, 384, 64, False),
    ("fp8", False, 64, 384, 256, False),  # a ragged last gate/up group: rows past it read the up rows, masked
    ("bf16", False, 32, 160, 64, False), ("bf16", True, 64, 96, 64, False),
    ("nvfp4", False, 32, 160, 64, False), ("nvfp4", True, 64, 96, 64, False),  # packed bytes: tiles of [R, BK / 2]
    # one dot: a program's gate rows then up rows as one block of 2 x block_n rows (whole groups)
    ("fp8", False, 64, 384, 64, True), ("bf16", True, 64, 128, 64, True), ("nvfp4", True, 64, 192, 64, True),
    ("nvfp4", False, 64, 128, 64, True),
])
def test_weight_tiles_by_tma_give_the_same_bits(monkeypatch, fmt, swap_ab, block_n, inter, group, one_dot):
    """`weight_tma` (the weight tiles copied through a tensor descriptor of [E * N, K], or K / 2 bytes for NVFP4)
    multiplies the same weights in the same order as the pointer loads: identical outputs, and the reference's. The
    descriptor's rows past an expert's N are the next expert's, past the last expert zeros: only masked columns see
    them. H = 96 with K steps of 64 (bf16, NVFP4): the last step's columns past K read as zeros. With one dot in
    GEMM 1 (`gate_up_one_dot`) the block holds the gate rows then the up rows."""
    from quickmoe.kernels import moe_configs

    g = torch.Generator().manual_seed(block_n + inter + swap_ab + one_dot)
    e, hidden = 4, 256
    if fmt == "fp8":
        w1, w2, kw = _fp8_experts(e, hidden, inter, g, (1, 1))
    elif fmt == "nvfp4":
        w1, w2, kw = _nvfp4_experts(e, hidden, inter, g)
    else:
        w1 = (torch.randn(e, 2 * inter, hidden, generator=g) * hidden ** -0.5).to(DEVICE)
        w2 = (torch.randn(e, hidden, inter, generator=g) * inter ** -0.5).to(DEVICE)
        kw = {}
    x = torch.randn(11, hidden, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(11, e, generator=g).to(DEVICE), 2, scoring="softmax_topk", renormalize=True)
    kw.update(gate_up_group=group, activation="silu")
    outs = []
    for tma in (False, True):
        config = moe_configs.MoEKernelConfig(block_m=16, block_n=block_n, block_k=128 if fmt == "fp8" else 64,
                                             swap_ab=swap_ab, weight_tma=tma, gate_up_one_dot=one_dot)
        monkeypatch.setattr(moe_configs, "moe_kernel_config", lambda *args, c=config, **kwargs: c)
        outs.append(fused_moe(x, weights, ids, w1, None, w2, None, **kw))
    if fmt == "fp8":  # the reference quantizes the float32 activations as the kernel's quantizer does
        want = fused_moe_ref(x, weights, ids.long(), w1, None, w2, None, fp8_activations=True, **kw).double()
    else:
        want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1.double() if fmt == "bf16" else w1, None,
                             w2.double() if fmt == "bf16" else w2, None, **kw)
    assert torch.equal(outs[0], outs[1])
    assert (outs[1].double() - want).norm() / want.norm() < 3e-5  # float32 sums in the kernel's order


@pytest.mark.parametrize("block_m,block_n,swap_ab,split_k", [
    (64, 64, False, 1),  # the H200 prefill tiles: each step's factors loaded one step ahead
    (64, 32, True, 1),  # the transposed orientation
    (64, 64, False, 2),  # K in two parts: each part's first factors from its own first step
    (16, 64, False, 1),  # a decode-sized tile: the factors loaded in the step
])
def test_fp8_step_factors_belong_to_their_step(monkeypatch, block_m, block_n, swap_ab, split_k):
    """Each 128-column step's dot is scaled by that step's factor (activation scale x weight scale), whether the
    tile loads the factors in the step or one step ahead (`FP8_FACTORS_AHEAD_BLOCK_M`, GEMM 1): the reference's
    result with GEMM 1's K in 4 steps whose scales lie orders of magnitude apart, so a factor of a neighbouring
    step (one step late or early, or the clamped reload past the last step used) is off by orders. To float32 in
    the interpreter; on the GPU within 2e-2, as Hopper's FP8 wgmma (64-row tiles) keeps fewer bits in its sums
    (3e-3 and 8e-4 relative measured on the H200, 2026-12-04)."""
    from quickmoe.kernels import fused_moe as fused_moe_module, moe_configs

    config = moe_configs.MoEKernelConfig(block_m=block_m, block_n=block_n, block_k=128, swap_ab=swap_ab,
                                         split_k=split_k)
    monkeypatch.setattr(moe_configs, "moe_kernel_config", lambda *args, **kwargs: config)
    monkeypatch.setattr(fused_moe_module, "fp8_gemv_max_tokens", lambda device: 0)  # the tensor-core GEMMs
    g = torch.Generator().manual_seed(block_m + block_n + swap_ab + 7 * split_k)
    hidden, inter, e = 512, 128, 4  # GEMM 1's K in 4 steps (the factors ahead are GEMM 1's)
    w1, w2, kw = _fp8_experts(e, hidden, inter, g, (64, 128))  # one weight scale per tile in both GEMMs
    for name in ("w1_scales", "w2_scales"):  # factors of 10^-4 .. 10^4 from one K step to the next
        kw[name] = kw[name] * 10.0 ** torch.randint(-4, 5, kw[name].shape[:2], generator=g).to(DEVICE)[..., None]
    x = torch.randn(24, hidden, generator=g).to(DEVICE)
    x[:, 128:256] *= 1e3  # the activations' second group: its scales far from the others
    weights, ids = route_ref(torch.randn(24, e, generator=g).to(DEVICE), 2, scoring="softmax_topk",
                             renormalize=True)
    kw.update(gate_up_group=64, activation="silu")
    got = fused_moe(x, weights, ids, w1, None, w2, None, **kw)
    want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1, None, w2, None, fp8_activations=True, **kw)
    assert torch.isfinite(got).all() and want.std() > 0
    assert (got.double() - want).norm() / want.norm() < (1e-5 if DEVICE == "cpu" else 2e-2)


@pytest.mark.parametrize("block_n,inter", [(32, 128), (64, 160)])
def test_weight_tma_with_one_dot_refuses_what_one_block_cannot_hold(monkeypatch, block_n, inter):
    """One TMA block holds a program's gate rows then its up rows only when the program takes a whole gate/up group
    (block_n >= the group) and no group is ragged (I a multiple of the group): else a clear error, not wrong
    results."""
    from quickmoe.errors import ConfigError
    from quickmoe.kernels import moe_configs

    g = torch.Generator().manual_seed(inter)
    w1 = (torch.randn(4, 2 * inter, 96, generator=g) * 96 ** -0.5).to(DEVICE)
    w2 = (torch.randn(4, 96, inter, generator=g) * inter ** -0.5).to(DEVICE)
    x = torch.randn(5, 96, generator=g).to(DEVICE)
    weights, ids = route_ref(torch.randn(5, 4, generator=g).to(DEVICE), 2, scoring="softmax_topk", renormalize=True)
    config = moe_configs.MoEKernelConfig(block_m=16, block_n=block_n, block_k=64, weight_tma=True,
                                         gate_up_one_dot=True)
    monkeypatch.setattr(moe_configs, "moe_kernel_config", lambda *args, **kwargs: config)
    with pytest.raises(ConfigError, match=f"whole gate/up groups: block_n {block_n} >= the group's 64 columns and "
                                          f"the intermediate size {inter} a multiple of 64"):
        fused_moe(x, weights, ids, w1, None, w2, None, gate_up_group=64, activation="silu")


@pytest.mark.parametrize("shape,dtype", [
    pytest.param(shape, dtype, id=f"{shape[0]}x{shape[1]}-{str(dtype)[6:]}") for shape, dtype in (
        *((shape, dtype) for shape in ((5, 256), (3, 200), (1, 128), (37, 1100), (70, 3000), (521, 2112))
          for dtype in (torch.float32, torch.bfloat16)),
        ((16, 4096), torch.bfloat16), ((128, 768), torch.bfloat16), ((8, 14336), torch.bfloat16),
        ((64, 2048), torch.bfloat16))])
def test_fp8_activation_quantizer_is_bit_exact(shape, dtype):
    """Tiles of one group, of several groups of a row, and of two rows of 16 groups (521 x 2112): ragged rows,
    a ragged last group, and groups past a program's span. 16 x 4096, 128 x 768 and 8 x 14336 (FP8 experts' bf16
    activations at T = 16 and 4) take 256-value tiles, 64 x 2048 512-value ones: each computed wrong bits on the
    H200 when its warps held 2 values a thread (see `launch_tile`; float32 failed alike there)."""
    g = torch.Generator().manual_seed(shape[1])
    x = torch.randn(shape, generator=g) * torch.exp(torch.randn(shape[0], 1, generator=g) * 3)
    x[0, :5] = 0.0
    x = x.to(dtype).to(DEVICE)
    q, scales = quantize_fp8_per_token_group(x)
    q_ref, scales_ref = quantize_fp8_per_token_group_ref(x)
    assert torch.equal(scales, scales_ref) and torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))


def test_fp8_activation_scales_are_the_correctly_rounded_quotient():
    """scale = max(amax, eps) / 448 rounded once to the nearest float32, by the kernel and the reference on any
    device, so the e4m3 values are the CPU reference's too. On the H200 both had the scale one unit off in its last
    place at times (torch divides a tensor by a scalar through its reciprocal on CUDA; Triton's float32 `/` is not
    IEEE division): 55 of 81,920 values of 40 x 2,048 bf16 activations then rounded to the other e4m3 neighbour
    of a tie (docs/benchmarks.md, 2026-11-29 eighth session)."""
    g = torch.Generator().manual_seed(448)
    x = (torch.randn(64, 2048, generator=g) * torch.exp(torch.randn(64, 1, generator=g) * 3)).to(torch.bfloat16)
    amax = x.float().view(64, 16, 128).abs().amax(dim=-1).double()
    want = (amax.clamp(min=1e-10) / 448.0).float()  # rounding the float64 quotient: the correctly rounded one
    q_cpu, _ = quantize_fp8_per_token_group_ref(x)
    for quantize in (quantize_fp8_per_token_group, quantize_fp8_per_token_group_ref):
        q, scales = quantize(x.to(DEVICE))
        assert torch.equal(scales.cpu(), want), f"{int((scales.cpu() != want).sum())} of {want.numel()} scales"
        assert torch.equal(q.view(torch.uint8).cpu(), q_cpu.view(torch.uint8))


@pytest.mark.parametrize("num_rows", [1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 1024, 8192])
@pytest.mark.parametrize("k", [128, 256, 768, 2048, 2880, 4096, 14336])
def test_the_quantizer_launch_never_gives_a_thread_2_values(num_rows, k):
    """A program's tile covers its rows x groups x 128 values, a power of two of groups that divides a row's (no
    masked lanes where K is whole groups), and its warps give each thread 1 value or >= MIN_VALUES_PER_THREAD (2 a
    thread computed wrong bits on the H200; see `launch_tile`)."""
    groups = -(-k // 128)
    rows, per_program, num_warps = launch_tile(num_rows, groups)
    assert groups % per_program == 0 and per_program & (per_program - 1) == 0
    assert rows >= 1 and num_warps in (1, 2, 4)
    values_per_thread = rows * per_program * 128 // (32 * num_warps)
    assert values_per_thread == 1 or values_per_thread >= MIN_VALUES_PER_THREAD


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
def test_quantized_experts_bf16_on_the_gpu(fmt):
    """Qwen3-30B-A3B-shaped experts (128 experts top-8, H 2048, I 768) in bf16 activations on the GPU (e4m3
    tensor-core dots for FP8, PTX decode for NVFP4): within 1e-2 of the float64 reference."""
    g = torch.Generator().manual_seed(7)
    make = _fp8_experts if fmt == "fp8" else _nvfp4_experts
    w1, w2, kw = make(128, 2048, 768, g)
    x = torch.randn(64, 2048, generator=g).to(torch.bfloat16).to(DEVICE)
    weights, ids = route_ref(torch.randn(64, 128, generator=g).to(DEVICE), 8, scoring="softmax_topk",
                             renormalize=True)
    kw.update(gate_up_group=64, activation="silu")
    got = fused_moe(x, weights, ids, w1, None, w2, None, **kw)
    want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1, None, w2, None,
                         fp8_activations=fmt == "fp8", **kw)
    # FP8: the kernel rounds its bf16 SwiGLU output to e4m3 for GEMM2, the reference its float64 one; where the two
    # straddle an e4m3 rounding boundary (a few % of elements) they land one e4m3 step (2^-3 relative) apart, which
    # alone measured 1.2% on the H100. A wrong scale, block or expert is off by far more than either bound.
    assert (got.double() - want).norm() / want.norm() < (2e-2 if fmt == "fp8" else 1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,fmt,num_tokens", [
    ("qwen3-30b-a3b", "fp8", 1), ("qwen3-30b-a3b", "fp8", 4), ("qwen3-30b-a3b", "fp8", 16),
    ("qwen3-30b-a3b", "fp8", 32),
    ("qwen3-30b-a3b", "fp8", 1024), ("mixtral-8x7b", "fp8", 4),
    ("qwen3-30b-a3b", "fp8", 2048), ("qwen3-30b-a3b", "fp8", 8192),
    ("mixtral-8x7b", "fp8", 1), ("mixtral-8x7b", "fp8", 16), ("mixtral-8x7b", "fp8", 1024),
    ("mixtral-8x7b", "fp8", 2048), ("mixtral-8x7b", "fp8", 8192),
    ("mixtral-8x7b", "nvfp4", 1), ("mixtral-8x7b", "nvfp4", 16), ("mixtral-8x7b", "nvfp4", 1024),
    ("mixtral-8x7b", "nvfp4", 2048), ("mixtral-8x7b", "nvfp4", 4096), ("mixtral-8x7b", "nvfp4", 8192),
    ("qwen3-30b-a3b", "nvfp4", 1), ("qwen3-30b-a3b", "nvfp4", 16), ("qwen3-30b-a3b", "nvfp4", 64),
    ("qwen3-30b-a3b", "nvfp4", 2048), ("qwen3-30b-a3b", "nvfp4", 8192),
    # the H200's 8-row decode tiles (2026-11-29, fourth session): NVFP4 at T = 1-64 (Qwen3) and 1-16 (Mixtral), and
    # the 120b's MXFP4 (its own H200 files since), with T = 128 back on 16 rows
    ("qwen3-30b-a3b", "nvfp4", 4), ("qwen3-30b-a3b", "nvfp4", 32), ("qwen3-30b-a3b", "nvfp4", 128),
    ("mixtral-8x7b", "nvfp4", 4), ("mixtral-8x7b", "nvfp4", 32),
    # Mixtral NVFP4's H200 tiles of 256 rows on 8 warps from T = 1,024 (2026-11-29, tenth session: the scales one
    # K step ahead): key 1,536
    ("mixtral-8x7b", "nvfp4", 1536),
    ("gpt-oss-120b", "mxfp4", 1), ("gpt-oss-120b", "mxfp4", 8), ("gpt-oss-120b", "mxfp4", 64),
    ("gpt-oss-120b", "mxfp4", 128),
    # gpt-oss-120b's H200 register-operand tiles with two K steps a stage (2026-11-30, eleventh session): keys 256, 512
    ("gpt-oss-120b", "mxfp4", 256), ("gpt-oss-120b", "mxfp4", 512),
    # its key 1,024 on the register-operand pair of 64 rows, two K steps a stage (2026-11-30, thirteenth session), the
    # Triton tiles it had there at key 1,536 (T = 1,281-2,816)
    ("gpt-oss-120b", "mxfp4", 1024), ("gpt-oss-120b", "mxfp4", 2048),
    # Qwen3 FP8's 8-row tiles at T = 3-10 (2026-11-29, fifth session): keys 4 and 8
    ("qwen3-30b-a3b", "fp8", 8), ("qwen3-30b-a3b", "fp8", 6),
    # Qwen3 bf16's H200 file (the same session): 8-row tiles at T = 1-24, the fallback's tiles past it
    ("qwen3-30b-a3b", "bf16", 1), ("qwen3-30b-a3b", "bf16", 2), ("qwen3-30b-a3b", "bf16", 12),
    ("qwen3-30b-a3b", "bf16", 40),
    # the H200 keys tuned on 2026-12-03 (fifth session): Qwen3 FP8's 8-row key 65 and key 96, Mixtral FP8's keys 96-256
    # (T = 32 reads key 16), Mixtral NVFP4's 96-256 (its 128-row transposed tile on 8 warps at 256)
    ("qwen3-30b-a3b", "fp8", 70), ("qwen3-30b-a3b", "fp8", 96),
    ("mixtral-8x7b", "fp8", 32), ("mixtral-8x7b", "fp8", 96), ("mixtral-8x7b", "fp8", 128),
    ("mixtral-8x7b", "fp8", 256), ("mixtral-8x7b", "nvfp4", 96), ("mixtral-8x7b", "nvfp4", 128),
    ("mixtral-8x7b", "nvfp4", 256),
    # the H200 keys tuned on 2026-12-03 (sixth session): Mixtral FP8's and NVFP4's keys 48, 64 and 80
    ("mixtral-8x7b", "fp8", 48), ("mixtral-8x7b", "fp8", 60), ("mixtral-8x7b", "fp8", 80),
    ("mixtral-8x7b", "nvfp4", 48), ("mixtral-8x7b", "nvfp4", 60), ("mixtral-8x7b", "nvfp4", 80),
    # and Qwen3 bf16's 8-row transposed tiles at keys 32, 48 and 64 (the same session)
    ("qwen3-30b-a3b", "bf16", 32), ("qwen3-30b-a3b", "bf16", 48), ("qwen3-30b-a3b", "bf16", 60),
    # Mixtral bf16's first H200 files (2026-12-03, seventh session): 8-row transposed tiles at T = 1 and 4 (GEMM 2's
    # 64 columns wide), 32 rows at key 64; the fallback's regimes written out from key 65
    ("mixtral-8x7b", "bf16", 1), ("mixtral-8x7b", "bf16", 4), ("mixtral-8x7b", "bf16", 64),
    ("mixtral-8x7b", "bf16", 2048),
    # and its 128-row keys 256, 384 and 512 (2026-12-04, second session; GEMM 1 in one dot at 256 and 512)
    ("mixtral-8x7b", "bf16", 256), ("mixtral-8x7b", "bf16", 384), ("mixtral-8x7b", "bf16", 480),
    # 2026-12-04 (third session): Qwen3 NVFP4's key 8,192 (256-row transposed tiles on 8 warps; T = 5,121-8,192) and
    # Mixtral FP8's key 65 (32-row tiles, GEMM 2 transposed; T = 65-72)
    ("qwen3-30b-a3b", "nvfp4", 6000), ("mixtral-8x7b", "fp8", 70),
    # 2026-12-04 (fourth session): Mixtral NVFP4's key 65 (32-row transposed tiles on 2 warps, K steps of 256;
    # T = 65-72), tuned over its range (`tune_moe.py --span`)
    ("mixtral-8x7b", "nvfp4", 72),
    # 2026-12-04 (fifth session): Qwen3's key 512 (T = 321-768 for NVFP4, 385-768 for FP8): the fallback's 64-row
    # tiles for NVFP4, 64-row tiles with the weights by TMA for FP8
    ("qwen3-30b-a3b", "nvfp4", 500), ("qwen3-30b-a3b", "fp8", 500),
    # 2026-12-05 (second session): the H100's gpt-oss files tuned on the H100 for the first time since 2026-11-24:
    # 8-row transposed tiles at T = 1-16 (K in 2 parts at T = 1), register-operand tiles at keys 64-512 (20b)
    ("gpt-oss-20b", "mxfp4", 1), ("gpt-oss-20b", "mxfp4", 2), ("gpt-oss-20b", "mxfp4", 4),
    ("gpt-oss-20b", "mxfp4", 8), ("gpt-oss-20b", "mxfp4", 16), ("gpt-oss-20b", "mxfp4", 32),
    ("gpt-oss-20b", "mxfp4", 64), ("gpt-oss-20b", "mxfp4", 128), ("gpt-oss-20b", "mxfp4", 200),
    ("gpt-oss-20b", "mxfp4", 500), ("gpt-oss-120b", "mxfp4", 2), ("gpt-oss-120b", "mxfp4", 16),
])
def test_the_shipped_tuned_configs_compute_the_reference(shape, fmt, num_tokens):
    """The device's tuned tables for these shapes (kernels/configs/: BLOCK_M 128 with one warpgroup for FP8's GEMM 1,
    the H200's transposed NVFP4 tiles of 128 and 256 rows, its NVFP4 decode tiles of 2 warps, ...) at their real sizes,
    against the float64 reference; the bounds of test_quantized_experts_bf16_on_the_gpu. FP8 at T = 16 and 32 (Qwen3)
    and 4 (Mixtral) failed on the H200 with every config (relative errors 3.5-6.4): the activations' quantizer took
    tiles of 2 values a thread there, which computed wrong bits (fixed in `fp8_quant.launch_tile`)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from quickmoe.bench.moe_experts import SHAPES, make_experts

    spec = SHAPES[shape]
    g = torch.Generator().manual_seed(num_tokens)
    ex = make_experts(spec, fmt, torch.device(DEVICE), g)
    x = torch.randn(num_tokens, spec.hidden, generator=g).to(torch.bfloat16).to(DEVICE)
    weights, ids = route_ref(torch.randn(num_tokens, spec.experts, generator=g).to(DEVICE), spec.top_k,
                             scoring="softmax_topk", renormalize=True)
    got = fused_moe(x, weights, ids, ex.w1, None, ex.w2, None, **ex.kwargs)
    want = fused_moe_ref(x.double(), weights.double(), ids.long(), ex.w1, None, ex.w2, None,
                         fp8_activations=fmt == "fp8", **ex.kwargs)
    assert (got.double() - want).norm() / want.norm() < (2e-2 if fmt == "fp8" else 1e-2)
