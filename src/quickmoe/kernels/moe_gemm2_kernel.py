"""GEMM 2 of the MoE experts as a Triton kernel (down (+ bias) times each assignment's routing weight), and the
combine of each token's k rows, launched by `kernels/moe_gemm.py`'s `moe_gemm2` and `moe_combine`, whose docstrings
give the layouts, the formats and the configs. GEMM 2's programs are tiled and loop over K as GEMM 1's
(`kernels/moe_gemm1_kernel.py`): an (M tile, N tile) a program, the expert's rows gathered through `sorted_ids`,
all of K or a part of it, the parts added in order by the tile's last program.
"""

from __future__ import annotations

try:  # CPU installs without triton keep the torch references
    import triton
    import triton.language as tl

    from quickmoe.kernels.moe_tiles import (
        NVFP4_ACC,
        PAIRS_ACC,
        SCALES_AHEAD_BLOCK_M,
        act_tile,
        fp8_step_scales,
        mma,
        mxfp4_scales,
        rows_last,
        step_scales,
        weight_tile,
        zeros,
    )
    from quickmoe.kernels.moe_program_tile import tile_of, valid_rows
    from quickmoe.kernels.pdl import pdl_wait
    from quickmoe.kernels.tickets import last_ticket, reset_ticket, store_part, sum_parts
except ImportError:  # pragma: no cover
    triton = None

__all__: list[str] = []  # launched by kernels/moe_gemm.py


if triton is not None:

    @triton.jit(do_not_specialize=["num_assignments", "num_m", "group_m"])
    def _gemm2_kernel(x_ptr, xs_ptr, w_ptr, s_ptr, bias_ptr, row_scale_ptr, route_w_ptr, out_ptr, partial_ptr,
                      counter_ptr, sorted_ids_ptr, block_expert_ptr, num_padded_ptr, num_assignments, num_m, num_n,
                      group_m, stride_x, stride_xs,
                      H: tl.constexpr, I: tl.constexpr, MXFP4: tl.constexpr, NVFP4: tl.constexpr,
                      FP8_SCALE_ROWS: tl.constexpr, A_MXFP8: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      PRECISION: tl.constexpr, DOT_DTYPE: tl.constexpr, PTX: tl.constexpr,
                      MXFP4_PTX: tl.constexpr, SWAP_AB: tl.constexpr, HAS_BIAS: tl.constexpr,
                      ROW_SCALE: tl.constexpr, SUB_TILES: tl.constexpr, W_TMA: tl.constexpr, SPLIT_K: tl.constexpr,
                      K_PART: tl.constexpr, PDL: tl.constexpr):
        pdl_wait(PDL)
        pid_m, pid_n = tile_of(tl.program_id(0), num_m, num_n, group_m)
        if pid_m * BLOCK_M < tl.load(num_padded_ptr):
            first = pid_m * BLOCK_M
            if SUB_TILES:  # a tile of few rows: a quarter of them (see _sub_tiles)
                if valid_rows(sorted_ids_ptr, pid_m, num_assignments, BLOCK_M) <= BLOCK_M // 4:
                    _gemm2_tile(x_ptr, xs_ptr, w_ptr, s_ptr, bias_ptr, row_scale_ptr, route_w_ptr, out_ptr,
                                partial_ptr, counter_ptr, sorted_ids_ptr, block_expert_ptr, pid_m, pid_n, first,
                                num_assignments, stride_x, stride_xs, H, I, MXFP4, NVFP4, FP8_SCALE_ROWS, A_MXFP8,
                                BLOCK_M // 4, BLOCK_N, BLOCK_K, PRECISION, DOT_DTYPE, PTX, MXFP4_PTX, SWAP_AB, HAS_BIAS,
                                ROW_SCALE, W_TMA, num_n, SPLIT_K, K_PART)
                else:
                    _gemm2_tile(x_ptr, xs_ptr, w_ptr, s_ptr, bias_ptr, row_scale_ptr, route_w_ptr, out_ptr,
                                partial_ptr, counter_ptr, sorted_ids_ptr, block_expert_ptr, pid_m, pid_n, first,
                                num_assignments, stride_x, stride_xs, H, I, MXFP4, NVFP4, FP8_SCALE_ROWS, A_MXFP8,
                                BLOCK_M, BLOCK_N, BLOCK_K, PRECISION, DOT_DTYPE, PTX, MXFP4_PTX, SWAP_AB, HAS_BIAS,
                                ROW_SCALE, W_TMA, num_n, SPLIT_K, K_PART)
            else:
                _gemm2_tile(x_ptr, xs_ptr, w_ptr, s_ptr, bias_ptr, row_scale_ptr, route_w_ptr, out_ptr,
                            partial_ptr, counter_ptr, sorted_ids_ptr, block_expert_ptr, pid_m, pid_n, first,
                            num_assignments, stride_x, stride_xs, H, I, MXFP4, NVFP4, FP8_SCALE_ROWS, A_MXFP8, BLOCK_M,
                            BLOCK_N, BLOCK_K, PRECISION, DOT_DTYPE, PTX, MXFP4_PTX, SWAP_AB, HAS_BIAS, ROW_SCALE, W_TMA,
                            num_n, SPLIT_K, K_PART)

    @triton.jit
    def _gemm2_tile(x_ptr, xs_ptr, w_ptr, s_ptr, bias_ptr, row_scale_ptr, route_w_ptr, out_ptr, partial_ptr,
                    counter_ptr, sorted_ids_ptr, block_expert_ptr, pid_m, pid_n, first, num_assignments, stride_x,
                    stride_xs, H: tl.constexpr, I: tl.constexpr, MXFP4: tl.constexpr, NVFP4: tl.constexpr,
                    FP8_SCALE_ROWS: tl.constexpr, A_MXFP8: tl.constexpr, BM: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, PRECISION: tl.constexpr, DOT_DTYPE: tl.constexpr, PTX: tl.constexpr,
                    MXFP4_PTX: tl.constexpr, SWAP_AB: tl.constexpr, HAS_BIAS: tl.constexpr, ROW_SCALE: tl.constexpr,
                    W_TMA: tl.constexpr, num_n, SPLIT_K: tl.constexpr, K_PART: tl.constexpr):
        """GEMM 2 of rows [first, first + BM) of sorted_ids (one expert's) and the program's output columns
        (SPLIT_K > 1: over this program's part of K, as GEMM 1's)."""
        expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)  # offsets of 120b dense experts pass 2^31
        assign = tl.load(sorted_ids_ptr + first + tl.arange(0, BM))  # [BM]
        m_ok = assign < num_assignments
        rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN] output columns = weight rows
        n_ok = rows < H
        k_lo = tl.program_id(1) * K_PART if SPLIT_K > 1 else 0
        acc = zeros(BLOCK_N, BM, SWAP_AB)
        if (MXFP4_PTX or (PTX and NVFP4)) and BM >= SCALES_AHEAD_BLOCK_M:
            s_w_next = step_scales(s_ptr, expert, rows, n_ok, k_lo, H, I, NVFP4, BLOCK_K)
        else:
            s_w_next = 0
        for step in range(0, K_PART, BLOCK_K):
            k0 = k_lo + step
            kk = k0 + tl.arange(0, BLOCK_K)
            s_w = s_w_next
            if MXFP4_PTX and BM < SCALES_AHEAD_BLOCK_M:
                s_w = mxfp4_scales(s_ptr, expert, rows, n_ok, k0, H, I, BLOCK_K)
            a = act_tile(x_ptr, xs_ptr, assign, m_ok, kk, I, stride_x, stride_xs, A_MXFP8, DOT_DTYPE, SWAP_AB)
            w = weight_tile(w_ptr, s_ptr, expert, rows, n_ok, k0, H, I, MXFP4, NVFP4, BLOCK_N, BLOCK_K,
                             DOT_DTYPE, PTX, MXFP4_PTX, s_w, W_TMA, pid_n * BLOCK_N,
                             NVFP4 and BM >= SCALES_AHEAD_BLOCK_M)
            if (MXFP4_PTX or (PTX and NVFP4)) and BM >= SCALES_AHEAD_BLOCK_M:
                s_w_next = step_scales(s_ptr, expert, rows, n_ok, k0 + BLOCK_K, H, I, NVFP4, BLOCK_K)
            if FP8_SCALE_ROWS:
                acc += mma(zeros(BLOCK_N, BM, SWAP_AB), w, a, PRECISION, SWAP_AB) * fp8_step_scales(
                    xs_ptr, s_ptr, expert, assign, m_ok, rows, n_ok, pid_n * BLOCK_N, k0, H, I, stride_xs,
                    FP8_SCALE_ROWS, FP8_SCALE_ROWS % BLOCK_N == 0, SWAP_AB)
            else:
                acc = mma(acc, w, a, PRECISION, SWAP_AB)
        acc = rows_last(acc, SWAP_AB)  # [BM, BN]
        if SPLIT_K > 1:  # slab tile x SPLIT_K + part: this part's sums
            tile_id = (pid_m * num_n + pid_n).to(tl.int64)
            store_part(partial_ptr, tile_id * SPLIT_K + tl.program_id(1), acc, m_ok[:, None], BM, BLOCK_N)
            if last_ticket(counter_ptr, tile_id, SPLIT_K):  # the tile's last program: the other parts are visible
                total = sum_parts(partial_ptr, tile_id * SPLIT_K, m_ok[:, None], SPLIT_K, BM, BLOCK_N)  # in order
                reset_ticket(counter_ptr, tile_id)
                _gemm2_finish(total, bias_ptr, row_scale_ptr, route_w_ptr, out_ptr, expert, assign, m_ok, rows, n_ok,
                              H, NVFP4, PTX, MXFP4_PTX, HAS_BIAS, ROW_SCALE)
        else:
            _gemm2_finish(acc, bias_ptr, row_scale_ptr, route_w_ptr, out_ptr, expert, assign, m_ok, rows, n_ok, H,
                          NVFP4, PTX, MXFP4_PTX, HAS_BIAS, ROW_SCALE)

    @triton.jit
    def _gemm2_finish(acc, bias_ptr, row_scale_ptr, route_w_ptr, out_ptr, expert, assign, m_ok, rows, n_ok,
                      H: tl.constexpr, NVFP4: tl.constexpr, PTX: tl.constexpr, MXFP4_PTX: tl.constexpr,
                      HAS_BIAS: tl.constexpr, ROW_SCALE: tl.constexpr):
        """GEMM 2's epilogue on the float32 sums over K [BM, BN]: the decode's factor, NVFP4's row scale, the
        bias, each assignment's routing weight; stores the tile's rows."""
        if MXFP4_PTX:
            acc *= PAIRS_ACC
        if PTX and NVFP4:
            acc *= NVFP4_ACC
        if ROW_SCALE:
            acc *= tl.load(row_scale_ptr + expert * H + rows, mask=n_ok, other=0.0)[None, :]
        if HAS_BIAS:
            acc += tl.load(bias_ptr + expert * H + rows, mask=n_ok, other=0.0).to(tl.float32)[None, :]
        acc *= tl.load(route_w_ptr + assign, mask=m_ok, other=0.0).to(tl.float32)[:, None]
        tl.store(out_ptr + assign[:, None] * H + rows[None, :], acc.to(out_ptr.dtype.element_ty),
                 mask=m_ok[:, None] & n_ok[None, :])

    @triton.jit
    def _moe_combine_kernel(src_ptr, out_ptr, ids_ptr, absent_id, H, TOP_K: tl.constexpr, BLOCK_H: tl.constexpr,
                            ABSENT: tl.constexpr, PDL: tl.constexpr):
        pdl_wait(PDL)
        token = tl.program_id(0)
        cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
        ok = cols < H
        acc = tl.zeros([BLOCK_H], dtype=tl.float32)
        for j in tl.static_range(TOP_K):
            row_ok = ok
            if ABSENT:  # another rank's assignment: its row was written by no tile
                row_ok = ok & (tl.load(ids_ptr + token * TOP_K + j) != absent_id)
            acc += tl.load(src_ptr + (token * TOP_K + j) * H + cols, mask=row_ok, other=0.0).to(tl.float32)
        tl.store(out_ptr + token * H + cols, acc.to(out_ptr.dtype.element_ty), mask=ok)
