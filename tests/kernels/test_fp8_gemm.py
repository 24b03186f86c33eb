"""`fp8_block_linear` (Triton; Triton's interpreter on CPU) against `fp8_block_linear_ref` and against a float64
reference written here from the format's definition (formats/fp8.py): activations x_q[m, k] * x_scales[m, k // 128],
weights w[n, k] * w_scale_inv[n // bn, k // 128], both exact in float64, then the plain matmul.

Tolerances. In float32 output the kernel's only error in the interpreter is float32 summation: each step's dot sums
128 exact products, the steps are scaled and added, about K/128 + 128 additions deep, each rounding by at most 2^-24
relative to its partial sum. The bound used, |got - want| <= 1e-5 * (|x| @ |W|^T)[m, n] (the sum of the products'
magnitudes, which bounds every partial sum), is ~100x the depth x 2^-24 at K = 512 (measured: 4e-8) and far below
what a wrong scale, block or mask gives (a relative error of order 1). On the GPU the e4m3 wgmma accumulates within
a step at less than float32 precision (Hopper's FP8 dots keep about 14 bits): 2^-12 there (measured on the H100:
4e-5 at K = 2048 and 4096). bf16 output adds one rounding of the float32 result: at most 2^-7 relative (the
interpreter truncates to bf16; the GPU rounds to nearest, 2^-8).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from quickmoe.formats.fp8 import dequantize_fp8_block, quantize_fp8_block
from quickmoe.kernels.fp8_gemm import (Fp8GemmConfig, _config, fp8_block_linear, fp8_block_linear_ref,
                                       fp8_quant_block_linear, fp8_quant_block_linear_ref)
from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group, quantize_fp8_per_token_group_ref
from quickmoe.kernels.tickets import ticket_counters
from quickmoe.layers.fp8_linear import Fp8BlockLinearMethod
from quickmoe.layers.linear import Linear

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
GROUP = 128
FP32_REL = 1e-5  # float32 summation (module docstring)
FP32_REL_GPU = 2.0 ** -12  # e4m3 wgmma accumulation (module docstring)


def _operands(m: int, n: int, k: int, bn: int, seed: int, device: str = DEVICE, bias: bool = False):
    """Fresh random FP8 operands: activations with per-token magnitudes over decades, weights quantized per
    (bn, 128) block from rows of varied magnitude (so the scales differ between blocks); no zeros."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g) * torch.exp(torch.randn(m, 1, generator=g))
    w = torch.randn(n, k, generator=g) * k ** -0.5 * torch.exp(torch.randn(n, 1, generator=g) * 0.5)
    x_q, x_s = quantize_fp8_per_token_group_ref(x, GROUP)
    w_q, w_s = quantize_fp8_block(w, (bn, GROUP))
    b = torch.randn(n, generator=g) if bias else None
    return [t.to(device) if t is not None else None for t in (x_q, x_s, w_q, w_s, b)]


def _definition(x_q, x_s, w, w_s, bn, bias=None):
    """out[m, n] = sum_k (x_q[m, k] x_s[m, k // 128]) (w[n, k] w_s[n // bn, k // 128]) + bias[n], in float64,
    block by block."""
    (m, k), n = x_q.shape, w.shape[0]
    out = torch.zeros(m, n, dtype=torch.float64)
    x_q, x_s, w, w_s = (t.cpu() for t in (x_q, x_s, w, w_s))
    for g in range(-(-k // GROUP)):
        cols = slice(g * GROUP, min(k, (g + 1) * GROUP))
        a = x_q[:, cols].double() * x_s[:, g:g + 1].double()  # [M, <=128]
        for j in range(-(-n // bn)):
            rows = slice(j * bn, min(n, (j + 1) * bn))
            out[:, rows] += a @ (w[rows, cols].double() * w_s[j, g].double()).T
    magnitude = (x_q.double().abs() * x_s.double().repeat_interleave(GROUP, 1)[:, :k]) @ \
        dequantize_fp8_block(w, w_s, (bn, GROUP), torch.float64).abs().T
    if bias is not None:
        out += bias.cpu().double()
        magnitude += bias.cpu().double().abs()
    return out, magnitude


def _assert_close(got, want, magnitude, out_dtype, rel=None):
    got = got.cpu().double()
    assert want.abs().max() > 0
    rel = (FP32_REL if DEVICE == "cpu" else FP32_REL_GPU) if rel is None else rel
    tol = rel * magnitude + (2.0 ** -7 * want.abs() if out_dtype == torch.bfloat16 else 0.0)
    err = (got - want).abs()
    assert (err <= tol).all(), f"max error {err.max():.3g}, worst error/tolerance {(err / tol).max():.3g}"


SHAPES = [(1, 128, 128), (3, 200, 300), (17, 384, 512), (64, 200, 128), (3, 384, 300), (17, 128, 512)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("bias", [False, True])
def test_kernel_matches_the_definition_and_the_ref(m, n, k, bias):
    x_q, x_s, w, w_s, b = _operands(m, n, k, 128, seed=m * 1000 + n + k, bias=bias)
    want, magnitude = _definition(x_q, x_s, w, w_s, 128, b)
    got = fp8_block_linear(x_q, x_s, w, w_s, (128, 128), b, out_dtype=torch.float32)
    _assert_close(got, want, magnitude, torch.float32)
    ref = fp8_block_linear_ref(x_q, x_s, w, w_s, (128, 128), b, out_dtype=torch.float32)
    _assert_close(ref, want, magnitude, torch.float32)
    got_bf16 = fp8_block_linear(x_q, x_s, w, w_s, (128, 128), b)  # bf16, the default
    assert got_bf16.dtype == torch.bfloat16
    _assert_close(got_bf16, want, magnitude, torch.bfloat16)


@pytest.mark.parametrize("config", [Fp8GemmConfig(16, 64, swap_ab=True), Fp8GemmConfig(16, 32),
                                    Fp8GemmConfig(32, 64, swap_ab=True), Fp8GemmConfig(16, 128)])
@pytest.mark.parametrize("bn", [128, 64, 256])
def test_every_orientation_and_scale_block(config, bn):
    """Both orientations, N tiles inside one weight scale row (bn a multiple of BLOCK_N) and across several
    (BLOCK_N = 128 > bn = 64): the scale row is n // bn either way."""
    m, n, k = 19, 320, 384
    x_q, x_s, w, w_s, b = _operands(m, n, k, bn, seed=bn + config.block_n, bias=True)
    want, magnitude = _definition(x_q, x_s, w, w_s, bn, b)
    got = fp8_block_linear(x_q, x_s, w, w_s, (bn, 128), b, out_dtype=torch.float32, config=config)
    _assert_close(got, want, magnitude, torch.float32)


@pytest.mark.parametrize("split_k,k", [(2, 512), (4, 500), (3, 384), (8, 1024), (4, 384)])
@pytest.mark.parametrize("swap_ab", [True, False])
def test_split_k_parts_sum_to_the_definition(split_k, k, swap_ab):
    """K cut into parts (500: the last part's last group ragged; 384 = 3 groups with split_k 4: 3 parts of one):
    the parts' sum against the float64 definition, with a bias added once, and the tile counters back to zero."""
    m, n = 5, 192
    x_q, x_s, w, w_s, b = _operands(m, n, k, 128, seed=split_k * 7 + k, bias=True)
    want, magnitude = _definition(x_q, x_s, w, w_s, 128, b)
    config = Fp8GemmConfig(16, 64, swap_ab=swap_ab, split_k=split_k)
    got = fp8_block_linear(x_q, x_s, w, w_s, (128, 128), b, out_dtype=torch.float32, config=config)
    _assert_close(got, want, magnitude, torch.float32)
    assert not ticket_counters(got.device, "fp8_gemm").any()
    again = fp8_block_linear(x_q, x_s, w, w_s, (128, 128), b, out_dtype=torch.float32, config=config)
    assert torch.equal(got, again)


@pytest.mark.parametrize("m,k", [(1, 256), (7, 300), (70, 512)])
def test_the_layers_product_quantizes_then_multiplies(m, k):
    """`fp8_quant_block_linear` (what the FP8 dense layers run): the quantizer's activations (ragged K: the last
    group's missing columns do not enter its maximum), then the GEMM, against the definition; its torch version
    likewise."""
    n = 160
    g = torch.Generator().manual_seed(m * 31 + k)
    x = (torch.randn(m, k, generator=g) * torch.exp(torch.randn(m, k // 64 + 1, generator=g).repeat_interleave(
        64, 1)[:, :k])).to(torch.bfloat16).to(DEVICE)  # magnitudes that differ between groups
    _, _, w, w_s, b = _operands(1, n, k, 128, seed=k, bias=True)
    x_q, x_s = quantize_fp8_per_token_group_ref(x, 128)
    want, magnitude = _definition(x_q, x_s, w, w_s, 128, b)
    for fn in (fp8_quant_block_linear, fp8_quant_block_linear_ref):
        _assert_close(fn(x, w, w_s, (128, 128), b, out_dtype=torch.float32), want, magnitude, torch.float32)


def test_configs_are_validated():
    with pytest.raises(ValueError, match="block_m = 24: expected a power of two"):
        Fp8GemmConfig(24, 64)
    with pytest.raises(ValueError, match="split_k = 0"):
        Fp8GemmConfig(16, 64, split_k=0)
    x_q, x_s, w, w_s, _ = _operands(2, 128, 256, 128, seed=1)
    with pytest.raises(ValueError, match="not FP8"):
        fp8_quant_block_linear(x_q, w, w_s, (128, 128))
    with pytest.raises(ValueError, match="differ in K"):
        fp8_quant_block_linear(torch.ones(2, 128, device=DEVICE), w, w_s, (128, 128))


def test_the_configs_cover_decode_and_prefill():
    for m in (1, 16, 17, 64, 65, 8192):
        cfg = _config(m, 5120, 2048)
        assert cfg.block_m >= min(m, 16) and cfg.block_n in (32, 64, 128, 256)
    # the split of K depends on K alone over the transposed (decode) tiles: a row's bits at every count up to 64
    for k in (128, 2048, 4096, 14336):
        assert len({_config(m, 2048, k).split_k for m in range(1, 65)}) == 1
    assert _config(1, 2048, 4096).split_k == 4 and _config(1, 5120, 2048).split_k == 2


def test_bad_operands_are_named():
    x_q, x_s, w, w_s, _ = _operands(2, 128, 256, 128, seed=1)
    with pytest.raises(ValueError, match=r"x_scales \[2, 2\]"):
        fp8_block_linear(x_q, x_s[:, :1], w, w_s, (128, 128))
    with pytest.raises(ValueError, match="differ in K"):
        fp8_block_linear(x_q, x_s, w[:, :128], w_s, (128, 128))
    with pytest.raises(ValueError, match=r"expected \(bn, 128\)"):
        fp8_block_linear_ref(x_q, x_s, w, w_s, (128, 64))
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        fp8_block_linear(x_q.float(), x_s, w, w_s, (128, 128))
    with pytest.raises(ValueError, match=r"w_scale_inv \[1, 2\]"):
        fp8_block_linear(x_q, x_s, w, w_s.bfloat16(), (128, 128))
    with pytest.raises(ValueError, match="several devices"):
        fp8_block_linear_ref(x_q, x_s, w, w_s, (128, 128), torch.ones(128, device="meta"))


def _fp8_layer(n: int, k: int, bias: bool, seed: int, device: str = DEVICE) -> Linear:
    method = Fp8BlockLinearMethod((128, 128))
    layer = Linear(k, n, bias=bias, dtype=torch.bfloat16, device=device, quant_method=method)
    _, _, w, w_s, b = _operands(1, n, k, 128, seed=seed, device=device, bias=bias)
    with torch.no_grad():
        layer.weight.copy_(w)
        layer.weight_scale_inv.copy_(w_s)
        if bias:
            layer.bias.copy_(b.to(torch.bfloat16))
    return layer


@pytest.mark.parametrize("bias", [False, True])
def test_layer_on_the_cpu_keeps_the_dequantizing_path(bias):
    layer = _fp8_layer(200, 256, bias, seed=5, device="cpu")
    x = torch.randn(2, 3, 256, generator=torch.Generator().manual_seed(6)).to(torch.bfloat16)
    assert not layer.quant_method.uses_fp8_gemm(x)
    weight = dequantize_fp8_block(layer.weight, layer.weight_scale_inv, (128, 128), torch.bfloat16)
    assert torch.equal(layer(x), F.linear(x, weight, layer.bias))


@pytest.mark.parametrize("bias", [False, True])
def test_layer_fp8_gemm_path(monkeypatch, bias):
    """The CUDA path forced on (the interpreter on CPU): the leading dims go through [M, K] and back, the
    result is the FP8-activation product (the reference on the same quantized activations), close to the
    dequantizing path (within the activations' e4m3 rounding)."""
    layer = _fp8_layer(200, 256, bias, seed=7)
    x = torch.randn(2, 3, 256, generator=torch.Generator().manual_seed(8)).to(torch.bfloat16).to(DEVICE)
    weight = dequantize_fp8_block(layer.weight, layer.weight_scale_inv, (128, 128), torch.bfloat16)
    plain = F.linear(x, weight, layer.bias)  # the dequantizing path
    monkeypatch.setattr(Fp8BlockLinearMethod, "uses_fp8_gemm", lambda self, x: True)
    got = layer(x)
    assert got.shape == (2, 3, 200) and got.dtype == torch.bfloat16
    x_q, x_s = quantize_fp8_per_token_group_ref(x.reshape(6, 256), GROUP)
    want, magnitude = _definition(x_q, x_s, layer.weight, layer.weight_scale_inv, 128, layer.bias)
    _assert_close(got.reshape(6, 200), want, magnitude, torch.bfloat16)
    assert (got.double() - plain.double()).norm() / plain.double().norm() < 0.05  # 0.02 measured


def test_stacked_fp8_layer_takes_activations_quantized_beside_the_norm(monkeypatch):
    """`FusedLinear(x, x_fp8)`: an FP8 stacked layer on its GEMM multiplies the given quantized rows (made by the norm
    before it: `RMSNorm.forward_fp8`) instead of quantizing x, so given another row's quantization the result is
    that row's, bit for bit; where the GEMM does not run, x_fp8 is refused."""
    from quickmoe.layers.linear import FusedLinear

    method = Fp8BlockLinearMethod((128, 128))
    layer = FusedLinear(256, [128, 128], bias=False, dtype=torch.bfloat16, device=DEVICE, quant_method=method)
    _, _, w, w_s, _ = _operands(1, 256, 256, 128, seed=9, device=DEVICE, bias=False)
    with torch.no_grad():
        layer.part(0).weight.copy_(w[:128])
        layer.part(1).weight.copy_(w[128:])
        layer.part(0).weight_scale_inv.copy_(w_s[:1])
        layer.part(1).weight_scale_inv.copy_(w_s[1:])
    g = torch.Generator().manual_seed(10)
    x, other = (torch.randn(3, 256, generator=g).to(torch.bfloat16).to(DEVICE) for _ in range(2))
    x_fp8 = quantize_fp8_per_token_group_ref(other, GROUP)
    if DEVICE == "cpu":
        assert not layer.takes_fp8_input(x)
        with pytest.raises(AssertionError, match="does not take it"):
            layer(x, x_fp8)
    monkeypatch.setattr(Fp8BlockLinearMethod, "uses_fp8_gemm", lambda self, x: True)
    assert layer.takes_fp8_input(x)
    got = layer(x, x_fp8)
    assert torch.equal(got, layer(other)) and not torch.equal(got, layer(x))
    # a K of partial groups (192 columns): the norm's FP8 rows cover whole groups only, so the GEMM quantizes
    ragged = FusedLinear(192, [128, 128], bias=False, dtype=torch.bfloat16, device=DEVICE, quant_method=method)
    assert not ragged.takes_fp8_input(torch.randn(3, 192, generator=g).to(torch.bfloat16).to(DEVICE))


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 64, 4096])
@pytest.mark.parametrize("swap_ab", [None, False, True])
def test_kernel_on_the_gpu(m, swap_ab):
    """Qwen3-30B-A3B's qkv_proj shape (2048 -> 5120) on CUDA (e4m3 tensor-core dots): the default config, and
    each orientation at the default's tile sizes, against the float64 definition."""
    n, k = 5120, 2048
    x_q, x_s, w, w_s, b = _operands(m, n, k, 128, seed=m, device="cuda", bias=True)
    config = _config(m, n, k)
    if swap_ab is not None:
        config = Fp8GemmConfig(max(config.block_m, 16), config.block_n, config.num_warps, config.num_stages, swap_ab)
    want, magnitude = _definition(x_q, x_s, w, w_s, 128, b)
    for out_dtype in (torch.float32, torch.bfloat16):
        got = fp8_block_linear(x_q, x_s, w, w_s, (128, 128), b, out_dtype=out_dtype, config=config)
        _assert_close(got, want, magnitude, out_dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("n,k", [(5120, 2048), (2048, 4096)])
def test_decode_configs_on_the_gpu(n, k):
    """Qwen3-30B-A3B's qkv_proj and o_proj at decode sizes on CUDA, `_config`'s choices (K in 2 and 4 parts) and
    8 parts of narrower tiles: the definition; repeated calls give the same bits whichever part finishes last; a
    row's bits are the same alone (the tile's config), among 16 rows and among 40 (the 32-row tiles)."""
    g = torch.Generator().manual_seed(n + k)
    x = (torch.randn(40, k, generator=g) * torch.exp(torch.randn(40, 1, generator=g))).to(torch.bfloat16).cuda()
    _, _, w, w_s, b = _operands(1, n, k, 128, seed=k, device="cuda", bias=True)
    x_q, x_s = quantize_fp8_per_token_group(x, 128)
    want, magnitude = _definition(x_q, x_s, w, w_s, 128, b)
    for config in (None, Fp8GemmConfig(16, 32, 4, 4, True, split_k=8)):
        for out_dtype in (torch.float32, torch.bfloat16):
            got = fp8_block_linear(x_q[:16], x_s[:16], w, w_s, (128, 128), b, out_dtype=out_dtype, config=config)
            _assert_close(got, want[:16], magnitude[:16], out_dtype)
            for _ in range(3):
                assert torch.equal(got, fp8_block_linear(x_q[:16], x_s[:16], w, w_s, (128, 128), b,
                                                         out_dtype=out_dtype, config=config))
            alone = fp8_block_linear(x_q[5:6], x_s[5:6], w, w_s, (128, 128), b, out_dtype=out_dtype,
                                     config=config or _config(1, n, k))  # one token without a config runs on
            assert torch.equal(alone, got[5:6])  # the CUDA-core GEMV instead (test_fp8_gemv.py)
            if config is None:
                forty = fp8_quant_block_linear(x, w, w_s, (128, 128), b, out_dtype=out_dtype)
                assert torch.equal(forty[:16], got)
    assert not ticket_counters(x.device, "fp8_gemm").any()
