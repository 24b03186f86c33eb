"""`dense_gemm` (Triton; the interpreter on CPU) against float64 x W^T + b, every launch-config family (swapped
and plain tiles, K steps that do and do not divide K, partial row and column tiles), bf16 and fp16, with and
without a bias; on the GPU, a row's bits the same under every config and every row count (batch invariance)."""

from __future__ import annotations

import pytest
import torch

from quickmoe.kernels.dense_gemm import DenseConfig, dense_config, dense_gemm, dense_gemm_ref

pytest.importorskip("triton")
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

CONFIGS = [DenseConfig(16, 64, 128, 4, 4, swap=True), DenseConfig(16, 16, 64, 2, 3),
           DenseConfig(32, 64, 32, 4, 2, group_m=2), DenseConfig(64, 32, 64, 4, 3, swap=True)]


def _operands(rows, k, n, dtype, g, bias=True):
    x = torch.randn(rows, k, generator=g).to(DEVICE, dtype)
    w = (torch.randn(n, k, generator=g) / k ** 0.5).to(DEVICE, dtype)
    b = torch.randn(n, generator=g).to(DEVICE, dtype) if bias else None
    return x, w, b


def _check(got, x, w, b):
    exact = x.double() @ w.double().T + (b.double() if b is not None else 0.0)  # [M, N]
    assert got.shape == exact.shape and got.dtype == x.dtype
    # one rounding of a float32 sum to bf16 / fp16: <= half an ulp (a whole one in Triton's CPU interpreter, which
    # truncates), plus the float32 sum's own error
    ulp = (2.0 ** -8 if x.dtype == torch.bfloat16 else 2.0 ** -11) * (2 if DEVICE == "cpu" else 1)
    bound = exact.abs() * ulp + 1e-4
    worst = ((got.double() - exact).abs() - bound).max().item()
    assert worst <= 0, f"max excess over the rounding bound {worst:.3e}"


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"m{c.block_m}n{c.block_n}k{c.block_k}s{int(c.swap)}")
@pytest.mark.parametrize("rows,k,n", [(1, 96, 80), (5, 200, 150), (70, 64, 33)])
def test_dense_gemm_matches_float64(config, rows, k, n):
    g = torch.Generator().manual_seed(rows * 1000 + k + n)
    x, w, b = _operands(rows, k, n, torch.bfloat16, g)
    _check(dense_gemm(x, w, b, config), x, w, b)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_dense_gemm_default_config_fp16_no_bias_leading_dims(dtype):
    g = torch.Generator().manual_seed(7)
    x, w, _ = _operands(6, 128, 48, dtype, g, bias=False)
    got = dense_gemm(x.view(2, 3, 128), w, None)  # [2, 3, N]
    assert got.shape == (2, 3, 48)
    _check(got.view(6, 48), x, w, None)
    ref = dense_gemm_ref(x, w, None)
    assert (got.view(6, 48).float() - ref.float()).abs().max().item() <= 0.02 * ref.abs().max().item()


def test_dense_gemm_no_rows_and_bad_operands():
    g = torch.Generator().manual_seed(3)
    x, w, b = _operands(0, 32, 16, torch.bfloat16, g)
    assert dense_gemm(x, w, b).shape == (0, 16)
    with pytest.raises(ValueError, match="weight \\[N, K\\] with K contiguous"):
        dense_gemm(torch.randn(2, 32, device=DEVICE), w.float(), None)  # float32
    with pytest.raises(ValueError, match="K = x.shape"):
        dense_gemm(torch.randn(2, 31, device=DEVICE, dtype=torch.bfloat16), w, None)
    with pytest.raises(ValueError, match="block_k = 24"):
        DenseConfig(16, 16, 24, 4, 3)


def test_dense_config_covers_every_row_count():
    for rows in (1, 16, 17, 64, 65, 256, 257, 8192, 1 << 20):
        assert isinstance(dense_config(rows), DenseConfig)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the bits of the tensor cores' sums: CUDA only")
def test_dense_gemm_bits_do_not_depend_on_config_or_rows():
    """Batch invariance: each row of x gives the same bits whichever config and however many rows run with it
    (gpt-oss's o_proj K; N not a multiple of the column tiles)."""
    g = torch.Generator().manual_seed(11)
    x, w, b = _operands(1000, 4096, 720, torch.bfloat16, g)
    ref = dense_gemm(x, w, b, DenseConfig(128, 128, 64, 8, 3))
    _check(ref, x, w, b)
    configs = CONFIGS + [DenseConfig(16, 128, 128, 4, 4, swap=True), DenseConfig(64, 128, 64, 4, 4),
                         DenseConfig(128, 256, 64, 8, 3)]
    for rows in (1, 3, 16, 17, 64, 200, 256, 1000):
        for config in [None, *configs]:
            got = dense_gemm(x[:rows], w, b, config)
            assert torch.equal(got, ref[:rows]), f"rows {rows}, config {config}"
