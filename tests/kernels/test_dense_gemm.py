"""`dense_gemm` (Triton; the interpreter on CPU) against float64 x W^T + b, every launch-config family (swapped
and plain tiles, K steps that do and do not divide K, partial row and column tiles, K in parts summed in one program
or by one program a part), bf16 and fp16, with and without a bias; on the GPU, a row's bits the same under every
config and every row count (batch invariance)."""

from __future__ import annotations

import pytest
import torch

from quickmoe.kernels.dense_gemm import (PART_ALIGN, DenseConfig, dense_config, dense_gemm, dense_gemm_ref,
                                         dense_k_parts)

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


@pytest.mark.parametrize("rows,k,n", [(1, 2880, 40), (5, 2048, 24)])
def test_k_in_parts_one_program_or_one_a_part_give_the_same_bits(rows, k, n):
    """K of 3 parts (the last ragged) and of 2: summed in one program, or one program a part and the tile's last
    program adding them (the ticket path), both within a rounding of float64 and equal to the bit."""
    g = torch.Generator().manual_seed(rows * 7 + k)
    x, w, b = _operands(rows, k, n, torch.bfloat16, g)
    assert dense_k_parts(k)[0] > 1
    for block_m, block_n, swap in ((16, 16, False), (16, 32, True)):
        whole = dense_gemm(x, w, b, DenseConfig(block_m, block_n, 64, 4, 2, swap=swap))
        parts = dense_gemm(x, w, b, DenseConfig(block_m, block_n, 64, 4, 2, swap=swap, split=True))
        _check(whole, x, w, b)
        _check(parts, x, w, b)
        assert torch.equal(whole, parts), f"tile {block_m} x {block_n}, swap {swap}"
        again = dense_gemm(x, w, b, DenseConfig(block_m, block_n, 64, 4, 2, swap=swap, split=True))
        assert torch.equal(again, parts)  # the ticket counters were set back to zero


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("split", [False, True])
def test_parts_are_added_in_increasing_order_from_zero(split, swap):
    """The float32 addition of the parts is the documented one, y = ((0 + s_0) + s_1) + s_2, not another order.
    Part 0 sums to exactly +2^14 and part 2 to exactly -2^14 (one column each carries them), part 1 is random:
    s_0 + s_1 rounds s_1 to the float32 grid of [2^14, 2^15) when s_1 > 0 and to the finer one below 2^14 when
    s_1 < 0, while s_2 + s_1 does the opposite, so each order leaves its own trace in the float16 output."""
    g = torch.Generator().manual_seed(5 + split + 2 * swap)
    rows, k, n, big = 4, 2880, 32, 2.0 ** 14
    assert dense_k_parts(k) == (3, 1024)
    x = torch.randn(rows, k, generator=g).to(torch.float16)
    w = torch.zeros(n, k, dtype=torch.float16)
    w[:, 1024:2048] = (torch.randn(n, 1024, generator=g) * 0.05).to(torch.float16)
    x[:, 0] = x[:, 2048] = 1.0
    w[:, 0], w[:, 2048] = big, -big
    b = torch.randn(n, generator=g).to(torch.float16)
    s_1 = (x[:, 1024:2048].double() @ w[:, 1024:2048].double().T).float()  # [M, N]; its own rounding is ~1e-7
    in_order = ((big + s_1) - big + b.float()).to(torch.float16)
    reversed_order = ((-big + s_1) + big + b.float()).to(torch.float16)
    assert not torch.equal(in_order, reversed_order)  # the data tells the orders apart
    got = dense_gemm(x.to(DEVICE), w.to(DEVICE), b.to(DEVICE), DenseConfig(16, 32, 64, 4, 2, swap=swap, split=split)).cpu()
    assert torch.equal(got, in_order)


def test_parts_of_k_come_from_k_alone_and_cover_it():
    for k in (16, 96, 1000, 1536, 2048, 2880, 4096, 5000, 12288):
        parts, per_part = dense_k_parts(k)
        assert per_part % PART_ALIGN == 0 and (parts - 1) * per_part < k <= parts * per_part
        assert per_part <= max(PART_ALIGN, 2 * 1024)  # parts stay short enough to run side by side
    assert dense_k_parts(4096) == (4, 1024) and dense_k_parts(2880) == (3, 1024)


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
    with pytest.raises(ValueError, match="block_k = 512: expected <= 256"):
        DenseConfig(16, 16, 512, 4, 3)


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
                         DenseConfig(128, 256, 64, 8, 3), DenseConfig(16, 64, 256, 4, 5, swap=True, split=True),
                         DenseConfig(16, 32, 128, 2, 4, swap=True, split=True),
                         DenseConfig(16, 16, 256, 2, 4, split=True),
                         DenseConfig(64, 64, 128, 4, 4, swap=True, split=True)]
    for rows in (1, 3, 16, 17, 64, 200, 256, 1000):
        for config in [None, *configs]:
            got = dense_gemm(x[:rows], w, b, config)
            assert torch.equal(got, ref[:rows]), f"rows {rows}, config {config}"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs")
def test_dense_gemm_in_a_cuda_graph_gives_the_eager_bits():
    """Replays of a captured call (K in parts: the split path's workspace comes from the graph's pool, its ticket
    counters are set back to zero by each replay) give the eager call's bits, on new inputs each replay, at row
    counts of every table entry."""
    g = torch.Generator().manual_seed(13)
    for rows in (1, 16, 40, 100, 256):
        x, w, b = _operands(rows, 4096, 720, torch.bfloat16, g)
        static_x = x.clone()
        dense_gemm(static_x, w, b)  # compile and make the counters outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = dense_gemm(static_x, w, b)
        for _ in range(3):
            fresh = torch.randn(rows, 4096, generator=g).to(DEVICE, torch.bfloat16)
            static_x.copy_(fresh)
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(static_out, dense_gemm(fresh, w, b)), f"rows {rows}"
