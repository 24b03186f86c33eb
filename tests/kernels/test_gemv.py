"""The small-M dense `gemv` (Triton; the interpreter on CPU) against a float64 product on fresh random data:
1 to 4 rows, with and without a bias, N and K not multiples of the tiles, a weight that is a row slice of a
larger buffer; and its refusal of shapes it does not take."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")
from quickmoe.kernels.gemv import GEMV_MAX_ROWS, gemv, gemv_ref  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("rows,n,k,bias", [(1, 40, 96, True), (2, 33, 300, False), (3, 64, 256, True),
                                           (4, 17, 64, True)])
def test_gemv_matches_float64(rows, n, k, bias):
    g = torch.Generator().manual_seed(rows * 100 + n + k)
    fused = torch.randn(n + 8, k, generator=g).to(DEVICE)
    weight = fused[4:4 + n]  # a row slice, as FusedLinear's parts are
    b = torch.randn(n, generator=g).to(DEVICE) if bias else None
    x = torch.randn(rows, k, generator=g).to(DEVICE)
    got = gemv(x, weight, b, block_n=16, block_k=64)
    want = x.double() @ weight.double().T + (b.double() if bias else 0)
    assert got.shape == (rows, n) and got.dtype == x.dtype
    assert (got.double() - want).abs().max() < 1e-4 * want.abs().max()
    assert torch.allclose(got, gemv_ref(x, weight, b), rtol=1e-4, atol=1e-4)


def test_gemv_bf16():
    g = torch.Generator().manual_seed(9)
    w = torch.randn(48, 128, generator=g).to(torch.bfloat16).to(DEVICE)
    x = torch.randn(1, 128, generator=g).to(torch.bfloat16).to(DEVICE)
    got = gemv(x, w, None)
    want = x.double() @ w.double().T
    assert got.dtype == torch.bfloat16
    assert (got.double() - want).norm() / want.norm() < 1e-2


def test_gemv_refuses_what_it_does_not_take():
    w = torch.randn(8, 16, device=DEVICE)
    with pytest.raises(ValueError, match=f"at most {GEMV_MAX_ROWS} rows"):
        gemv(torch.randn(GEMV_MAX_ROWS + 1, 16, device=DEVICE), w, None)
    with pytest.raises(ValueError, match="K-contiguous"):
        gemv(torch.randn(1, 8, device=DEVICE), w.T, None)
