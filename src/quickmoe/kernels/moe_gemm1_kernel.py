"""GEMM 1 of the MoE experts as a Triton kernel: gate_up (+ bias) and the activation (gpt-oss's clamped SwiGLU, or
SiLU(gate) * up), launched by `kernels/moe_gemm.py`'s `moe_gemm1_swiglu`, whose docstring gives the layouts, the
formats and the configs. A program maps to an (M tile, N tile) (`moe_program_tile.tile_of`), gathers its expert's rows
through `sorted_ids`, runs the K loop over the gate and up rows of its columns (two dots a step, or one dot of both:
`gate_up_one_dot`), over all of K or its part of it (`split_k`: the tile's last program by ticket adds the float32
parts in order), and stores the epilogue's rows of inter. The operand tiles come from `kernels/moe_tiles.py`.
"""

from __future__ import annotations

try:  # CPU installs without triton keep the torch references
    import triton
    import triton.language as tl

    from quickmoe.kernels.moe_tiles import (
        FP8_FACTORS_AHEAD_BLOCK_M,
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

    @triton.jit(do_not_specialize=["num_assignments", "num_m", "group_m"])  # one compilation for every T
    def _gemm1_swiglu_kernel(x_ptr, xs_ptr, w_ptr, s_ptr, bias_ptr, row_scale_ptr, out_ptr, partial_ptr, counter_ptr,
                             sorted_ids_ptr,
                             block_expert_ptr, num_padded_ptr, top_k, num_assignments, num_m, num_n, group_m,
                             stride_x, stride_xs, limit, alpha,
                             H: tl.constexpr, I: tl.constexpr, MXFP4: tl.constexpr, NVFP4: tl.constexpr,
                             FP8_SCALE_ROWS: tl.constexpr, A_MXFP8: tl.constexpr,
                             GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr, PRECISION: tl.constexpr, DOT_DTYPE: tl.constexpr,
                             PTX: tl.constexpr, MXFP4_PTX: tl.constexpr, SWAP_AB: tl.constexpr,
                             HAS_BIAS: tl.constexpr, SILU: tl.constexpr, ROW_SCALE: tl.constexpr,
                             SUB_TILES: tl.constexpr, ONE_DOT: tl.constexpr, W_TMA: tl.constexpr,
                             SPLIT_K: tl.constexpr, K_PART: tl.constexpr, PDL: tl.constexpr):
        pdl_wait(PDL)
        pid_m, pid_n = tile_of(tl.program_id(0), num_m, num_n, group_m)
        if pid_m * BLOCK_M < tl.load(num_padded_ptr):  # tiles past the used ones do nothing
            first = pid_m * BLOCK_M  # the tile's first row of sorted_ids
            if SUB_TILES:  # a tile of few rows: a quarter of them (see _sub_tiles)
                if valid_rows(sorted_ids_ptr, pid_m, num_assignments, BLOCK_M) <= BLOCK_M // 4:
                    _gemm1_tile(x_ptr, xs_ptr, w_ptr, s_ptr, bias_ptr, row_scale_ptr, out_ptr, partial_ptr,
                                counter_ptr, sorted_ids_ptr,
                                block_expert_ptr, pid_m, pid_n, first, top_k, num_assignments, stride_x, stride_xs,
                                limit, alpha, H, I, MXFP4, NVFP4, FP8_SCALE_ROWS, A_MXFP8, GROUP, BLOCK_M // 4, BLOCK_N,
                                BLOCK_K, PRECISION, DOT_DTYPE, PTX, MXFP4_PTX, SWAP_AB, HAS_BIAS, SILU, ROW_SCALE,
                                ONE_DOT, W_TMA, num_n, SPLIT_K, K_PART)
                else:
                    _gemm1_tile(x_ptr, xs_ptr, w_ptr, s_ptr, bias_ptr, row_scale_ptr, out_ptr, partial_ptr,
                                counter_ptr, sorted_ids_ptr,
                                block_expert_ptr, pid_m, pid_n, first, top_k, num_assignments, stride_x, stride_xs,
                                limit, alpha, H, I, MXFP4, NVFP4, FP8_SCALE_ROWS, A_MXFP8, GROUP, BLOCK_M, BLOCK_N,
                                BLOCK_K, PRECISION, DOT_DTYPE, PTX, MXFP4_PTX, SWAP_AB, HAS_BIAS, SILU, ROW_SCALE,
                                ONE_DOT, W_TMA, num_n, SPLIT_K, K_PART)
            else:
                _gemm1_tile(x_ptr, xs_ptr, w_ptr, s_ptr, bias_ptr, row_scale_ptr, out_ptr, partial_ptr,
                            counter_ptr, sorted_ids_ptr,
                            block_expert_ptr, pid_m, pid_n, first, top_k, num_assignments, stride_x, stride_xs,
                            limit, alpha, H, I, MXFP4, NVFP4, FP8_SCALE_ROWS, A_MXFP8, GROUP, BLOCK_M, BLOCK_N,
                            BLOCK_K, PRECISION, DOT_DTYPE, PTX, MXFP4_PTX, SWAP_AB, HAS_BIAS, SILU, ROW_SCALE,
                            ONE_DOT, W_TMA, num_n, SPLIT_K, K_PART)

    @triton.jit
    def _gemm1_two_dots(x_ptr, xs_ptr, w_ptr, s_ptr, expert, token, m_ok, gate_rows, up_rows, gate_row0, up_row0,
                        n_ok, stride_x,
                        stride_xs, H: tl.constexpr, I: tl.constexpr, MXFP4: tl.constexpr, NVFP4: tl.constexpr,
                        FP8_SCALE_ROWS: tl.constexpr, A_MXFP8: tl.constexpr, BM: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr, PRECISION: tl.constexpr, DOT_DTYPE: tl.constexpr, PTX: tl.constexpr,
                        MXFP4_PTX: tl.constexpr, SWAP_AB: tl.constexpr, W_TMA: tl.constexpr, k_lo,
                        K_PART: tl.constexpr):
        """GEMM 1's K loop over columns [k_lo, k_lo + K_PART) as two dots a step (gate rows, up rows) -> the
        float32 sums (gate, up), [BM, BN] each."""
        acc_gate = zeros(BLOCK_N, BM, SWAP_AB)
        acc_up = zeros(BLOCK_N, BM, SWAP_AB)
        one_scale: tl.constexpr = FP8_SCALE_ROWS % BLOCK_N == 0 and I % BLOCK_N == 0  # one weight scale a tile
        fp8_ahead: tl.constexpr = FP8_SCALE_ROWS > 0 and one_scale and BM >= FP8_FACTORS_AHEAD_BLOCK_M
        if fp8_ahead:  # the first step's factors (see FP8_FACTORS_AHEAD_BLOCK_M)
            f_gate_next = fp8_step_scales(xs_ptr, s_ptr, expert, token, m_ok, gate_rows, n_ok, gate_row0, k_lo, 2 * I,
                                          H, stride_xs, FP8_SCALE_ROWS, one_scale, SWAP_AB)
            f_up_next = fp8_step_scales(xs_ptr, s_ptr, expert, token, m_ok, up_rows, n_ok, up_row0, k_lo, 2 * I, H,
                                        stride_xs, FP8_SCALE_ROWS, one_scale, SWAP_AB)
        else:
            f_gate_next = 0
            f_up_next = 0
        if (MXFP4_PTX or (PTX and NVFP4)) and BM >= SCALES_AHEAD_BLOCK_M:  # see SCALES_AHEAD_BLOCK_M
            s_gate_next = step_scales(s_ptr, expert, gate_rows, n_ok, k_lo, 2 * I, H, NVFP4, BLOCK_K)
            s_up_next = step_scales(s_ptr, expert, up_rows, n_ok, k_lo, 2 * I, H, NVFP4, BLOCK_K)
        else:
            s_gate_next = 0
            s_up_next = 0
        for step in range(0, K_PART, BLOCK_K):
            k0 = k_lo + step
            kk = k0 + tl.arange(0, BLOCK_K)
            s_gate = s_gate_next
            s_up = s_up_next
            if MXFP4_PTX and BM < SCALES_AHEAD_BLOCK_M:
                s_gate = mxfp4_scales(s_ptr, expert, gate_rows, n_ok, k0, 2 * I, H, BLOCK_K)
                s_up = mxfp4_scales(s_ptr, expert, up_rows, n_ok, k0, 2 * I, H, BLOCK_K)
            a = act_tile(x_ptr, xs_ptr, token, m_ok, kk, H, stride_x, stride_xs, A_MXFP8, DOT_DTYPE, SWAP_AB)
            w_gate = weight_tile(w_ptr, s_ptr, expert, gate_rows, n_ok, k0, 2 * I, H, MXFP4, NVFP4, BLOCK_N,
                                  BLOCK_K, DOT_DTYPE, PTX, MXFP4_PTX, s_gate, W_TMA, gate_row0,
                                  NVFP4 and BM >= SCALES_AHEAD_BLOCK_M)  # [BN, BK]
            w_up = weight_tile(w_ptr, s_ptr, expert, up_rows, n_ok, k0, 2 * I, H, MXFP4, NVFP4, BLOCK_N,
                                BLOCK_K, DOT_DTYPE, PTX, MXFP4_PTX, s_up, W_TMA, up_row0,
                                NVFP4 and BM >= SCALES_AHEAD_BLOCK_M)
            if (MXFP4_PTX or (PTX and NVFP4)) and BM >= SCALES_AHEAD_BLOCK_M:
                s_gate_next = step_scales(s_ptr, expert, gate_rows, n_ok, k0 + BLOCK_K, 2 * I, H, NVFP4, BLOCK_K)
                s_up_next = step_scales(s_ptr, expert, up_rows, n_ok, k0 + BLOCK_K, 2 * I, H, NVFP4, BLOCK_K)
            if FP8_SCALE_ROWS:  # one 128-column step: its dots in float32, scaled, then added
                if fp8_ahead:
                    f_gate = f_gate_next
                    f_up = f_up_next
                    k_next = tl.minimum(k0 + BLOCK_K, H - BLOCK_K)  # after the last step: any step's, unused
                    f_gate_next = fp8_step_scales(xs_ptr, s_ptr, expert, token, m_ok, gate_rows, n_ok, gate_row0,
                                                  k_next, 2 * I, H, stride_xs, FP8_SCALE_ROWS, one_scale, SWAP_AB)
                    f_up_next = fp8_step_scales(xs_ptr, s_ptr, expert, token, m_ok, up_rows, n_ok, up_row0, k_next,
                                                2 * I, H, stride_xs, FP8_SCALE_ROWS, one_scale, SWAP_AB)
                else:
                    f_gate = fp8_step_scales(xs_ptr, s_ptr, expert, token, m_ok, gate_rows, n_ok, gate_row0, k0,
                                             2 * I, H, stride_xs, FP8_SCALE_ROWS, one_scale, SWAP_AB)
                    f_up = fp8_step_scales(xs_ptr, s_ptr, expert, token, m_ok, up_rows, n_ok, up_row0, k0, 2 * I, H,
                                           stride_xs, FP8_SCALE_ROWS, one_scale, SWAP_AB)
                acc_gate += mma(zeros(BLOCK_N, BM, SWAP_AB), w_gate, a, PRECISION, SWAP_AB) * f_gate
                acc_up += mma(zeros(BLOCK_N, BM, SWAP_AB), w_up, a, PRECISION, SWAP_AB) * f_up
            else:
                acc_gate = mma(acc_gate, w_gate, a, PRECISION, SWAP_AB)
                acc_up = mma(acc_up, w_up, a, PRECISION, SWAP_AB)
        return rows_last(acc_gate, SWAP_AB), rows_last(acc_up, SWAP_AB)  # [BM, BN] each

    @triton.jit
    def _gemm1_one_dot(x_ptr, xs_ptr, w_ptr, s_ptr, expert, token, m_ok, gate_rows, size, n_ok, stride_x,
                       stride_xs, H: tl.constexpr, I: tl.constexpr, MXFP4: tl.constexpr, NVFP4: tl.constexpr,
                       FP8_SCALE_ROWS: tl.constexpr, A_MXFP8: tl.constexpr, BM: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, PRECISION: tl.constexpr, DOT_DTYPE: tl.constexpr, PTX: tl.constexpr,
                       MXFP4_PTX: tl.constexpr, SWAP_AB: tl.constexpr, W_TMA: tl.constexpr, gate_row0, k_lo,
                       K_PART: tl.constexpr):
        """GEMM 1's K loop (columns [k_lo, k_lo + K_PART)) as one dot a step over the gate rows then the up rows
        ([2 BN] weight rows; up row c lies `size` rows after gate row c) -> the float32 sums (gate, up), [BM, BN]
        each. W_TMA: the [2 BN] rows are one descriptor block from gate_row0, which needs size == BN (the host
        checks BLOCK_N == GROUP and no ragged last group), so the up rows follow the gate rows."""
        half = tl.arange(0, 2 * BLOCK_N) // BLOCK_N  # [2BN] 0: gate, 1: up
        both_rows = tl.reshape(tl.broadcast_to(gate_rows[None, :], (2, BLOCK_N)), (2 * BLOCK_N,)) + half * size
        both_ok = tl.reshape(tl.broadcast_to(n_ok[None, :], (2, BLOCK_N)), (2 * BLOCK_N,))
        acc = zeros(2 * BLOCK_N, BM, SWAP_AB)
        if (MXFP4_PTX or (PTX and NVFP4)) and BM >= SCALES_AHEAD_BLOCK_M:
            s_next = step_scales(s_ptr, expert, both_rows, both_ok, k_lo, 2 * I, H, NVFP4, BLOCK_K)
        else:
            s_next = 0
        for step in range(0, K_PART, BLOCK_K):
            k0 = k_lo + step
            kk = k0 + tl.arange(0, BLOCK_K)
            s_w = s_next
            if MXFP4_PTX and BM < SCALES_AHEAD_BLOCK_M:
                s_w = mxfp4_scales(s_ptr, expert, both_rows, both_ok, k0, 2 * I, H, BLOCK_K)
            a = act_tile(x_ptr, xs_ptr, token, m_ok, kk, H, stride_x, stride_xs, A_MXFP8, DOT_DTYPE, SWAP_AB)
            w = weight_tile(w_ptr, s_ptr, expert, both_rows, both_ok, k0, 2 * I, H, MXFP4, NVFP4, 2 * BLOCK_N,
                             BLOCK_K, DOT_DTYPE, PTX, MXFP4_PTX, s_w, W_TMA, gate_row0,
                             NVFP4 and BM >= SCALES_AHEAD_BLOCK_M)  # [2BN, BK]
            if (MXFP4_PTX or (PTX and NVFP4)) and BM >= SCALES_AHEAD_BLOCK_M:
                s_next = step_scales(s_ptr, expert, both_rows, both_ok, k0 + BLOCK_K, 2 * I, H, NVFP4, BLOCK_K)
            if FP8_SCALE_ROWS:  # gate and up rows: two scales, a [BM, 2 BN] factor loaded in the step
                acc += mma(zeros(2 * BLOCK_N, BM, SWAP_AB), w, a, PRECISION, SWAP_AB) * fp8_step_scales(
                    xs_ptr, s_ptr, expert, token, m_ok, both_rows, both_ok, 0, k0, 2 * I, H, stride_xs,
                    FP8_SCALE_ROWS, False, SWAP_AB)
            else:
                acc = mma(acc, w, a, PRECISION, SWAP_AB)
        both = tl.permute(tl.reshape(rows_last(acc, SWAP_AB), (BM, 2, BLOCK_N)), (0, 2, 1))  # [BM, BN, 2]
        return tl.split(both)  # gate, up: [BM, BN] each

    @triton.jit
    def _gemm1_tile(x_ptr, xs_ptr, w_ptr, s_ptr, bias_ptr, row_scale_ptr, out_ptr, partial_ptr, counter_ptr,
                    sorted_ids_ptr, block_expert_ptr,
                    pid_m, pid_n, first, top_k, num_assignments, stride_x, stride_xs, limit, alpha,
                    H: tl.constexpr, I: tl.constexpr, MXFP4: tl.constexpr, NVFP4: tl.constexpr,
                    FP8_SCALE_ROWS: tl.constexpr, A_MXFP8: tl.constexpr, GROUP: tl.constexpr, BM: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr, DOT_DTYPE: tl.constexpr,
                    PTX: tl.constexpr, MXFP4_PTX: tl.constexpr, SWAP_AB: tl.constexpr, HAS_BIAS: tl.constexpr,
                    SILU: tl.constexpr, ROW_SCALE: tl.constexpr, ONE_DOT: tl.constexpr, W_TMA: tl.constexpr,
                    num_n, SPLIT_K: tl.constexpr, K_PART: tl.constexpr):
        """GEMM 1 + SwiGLU of rows [first, first + BM) of sorted_ids (one expert's) and the program's columns.
        ONE_DOT: the columns' gate and up weight rows as one [2 BN, BK] tile (gate rows first) and one dot per K
        step, whose [BM, 2 BN] accumulator the epilogue splits; else a dot of BN rows each. Either way every
        output is the same sum over K in the same order of tensor-core steps: the same bits. SPLIT_K > 1: this
        program's part of K (program_id 1), the parts added by the tile's last program (`_split_parts`)."""
        expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)  # offsets of 120b dense experts pass 2^31
        assign = tl.load(sorted_ids_ptr + first + tl.arange(0, BM))  # [BM]
        m_ok = assign < num_assignments  # the sentinel A pads each expert's run
        token = assign // top_k
        group = pid_n // (GROUP // BLOCK_N)  # the gate/up group, and this program's part of its columns
        cols = (pid_n % (GROUP // BLOCK_N)) * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN] within the group
        size = tl.minimum(I - group * GROUP, GROUP)  # s_n: GROUP except in a ragged last group
        n_ok = cols < size
        gate_rows = 2 * group * GROUP + cols  # [BN] this group's slab: s_n gate rows, then s_n up rows
        up_rows = gate_rows + size
        gate_row0 = 2 * group * GROUP + (pid_n % (GROUP // BLOCK_N)) * BLOCK_N  # gate_rows[0]
        k_lo = tl.program_id(1) * K_PART if SPLIT_K > 1 else 0
        if ONE_DOT:
            gate, up = _gemm1_one_dot(x_ptr, xs_ptr, w_ptr, s_ptr, expert, token, m_ok, gate_rows, size, n_ok,
                                      stride_x, stride_xs, H, I, MXFP4, NVFP4, FP8_SCALE_ROWS, A_MXFP8, BM, BLOCK_N,
                                      BLOCK_K, PRECISION, DOT_DTYPE, PTX, MXFP4_PTX, SWAP_AB, W_TMA, gate_row0, k_lo,
                                      K_PART)
        else:
            gate, up = _gemm1_two_dots(x_ptr, xs_ptr, w_ptr, s_ptr, expert, token, m_ok, gate_rows, up_rows,
                                       gate_row0, gate_row0 + size, n_ok, stride_x, stride_xs, H, I, MXFP4, NVFP4,
                                       FP8_SCALE_ROWS, A_MXFP8, BM, BLOCK_N, BLOCK_K, PRECISION, DOT_DTYPE, PTX,
                                       MXFP4_PTX, SWAP_AB, W_TMA, k_lo, K_PART)
        if SPLIT_K > 1:  # slabs 2 (tile x SPLIT_K + part) and the next: this part's gate and up sums
            tile_id = (pid_m * num_n + pid_n).to(tl.int64)
            real = m_ok[:, None]  # the tile's assignments (the rest pad the expert's run): their partials only
            store_part(partial_ptr, 2 * (tile_id * SPLIT_K + tl.program_id(1)), gate, real, BM, BLOCK_N)
            store_part(partial_ptr, 2 * (tile_id * SPLIT_K + tl.program_id(1)) + 1, up, real, BM, BLOCK_N)
            if last_ticket(counter_ptr, tile_id, SPLIT_K):  # the tile's last program: the other parts are visible
                gate_sum = sum_parts(partial_ptr, 2 * tile_id * SPLIT_K, real, SPLIT_K, BM, BLOCK_N, 2)  # in order
                up_sum = sum_parts(partial_ptr, 2 * tile_id * SPLIT_K + 1, real, SPLIT_K, BM, BLOCK_N, 2)
                reset_ticket(counter_ptr, tile_id)
                _gemm1_finish(gate_sum, up_sum, bias_ptr, row_scale_ptr, out_ptr, expert, assign, m_ok, group, cols,
                              n_ok, gate_rows, up_rows, limit, alpha, I, NVFP4, GROUP, PTX, MXFP4_PTX, HAS_BIAS,
                              SILU, ROW_SCALE)
        else:
            _gemm1_finish(gate, up, bias_ptr, row_scale_ptr, out_ptr, expert, assign, m_ok, group, cols, n_ok,
                          gate_rows, up_rows, limit, alpha, I, NVFP4, GROUP, PTX, MXFP4_PTX, HAS_BIAS, SILU, ROW_SCALE)

    @triton.jit
    def _gemm1_finish(gate, up, bias_ptr, row_scale_ptr, out_ptr, expert, assign, m_ok, group, cols, n_ok,
                      gate_rows, up_rows, limit, alpha, I: tl.constexpr, NVFP4: tl.constexpr, GROUP: tl.constexpr,
                      PTX: tl.constexpr, MXFP4_PTX: tl.constexpr, HAS_BIAS: tl.constexpr, SILU: tl.constexpr,
                      ROW_SCALE: tl.constexpr):
        """GEMM 1's epilogue on the float32 sums over K (gate, up [BM, BN]): the decode's factor, NVFP4's row
        scale, the bias, the activation; stores the tile's rows of inter."""
        if MXFP4_PTX:  # the decode gave the weights times 2^-64 (exact: a power of two on float32)
            gate *= PAIRS_ACC
            up *= PAIRS_ACC
        if PTX and NVFP4:  # times 2^-7
            gate *= NVFP4_ACC
            up *= NVFP4_ACC
        if ROW_SCALE:  # NVFP4's global scale, constant along K
            gate *= tl.load(row_scale_ptr + expert * 2 * I + gate_rows, mask=n_ok, other=0.0)[None, :]
            up *= tl.load(row_scale_ptr + expert * 2 * I + up_rows, mask=n_ok, other=0.0)[None, :]
        if HAS_BIAS:
            gate += tl.load(bias_ptr + expert * 2 * I + gate_rows, mask=n_ok, other=0.0).to(tl.float32)[None, :]
            up += tl.load(bias_ptr + expert * 2 * I + up_rows, mask=n_ok, other=0.0).to(tl.float32)[None, :]
        y = gate_up_activation(gate, up, limit, alpha, SILU)
        out_cols = group * GROUP + cols  # [BN]
        tl.store(out_ptr + assign[:, None] * I + out_cols[None, :], y.to(out_ptr.dtype.element_ty),
                 mask=m_ok[:, None] & n_ok[None, :])

    @triton.jit
    def gate_up_activation(gate, up, limit, alpha, SILU: tl.constexpr):
        """GEMM 1's activation on float32 gate and up sums (bias included)."""
        if SILU:  # Mixtral, Qwen-MoE: SiLU(gate) * up
            y = gate * tl.sigmoid(gate) * up
        else:  # gpt-oss: gate clamped above, up on both sides, (up + 1) * gate * sigmoid(alpha * gate)
            gate = tl.minimum(gate, limit)
            up = tl.minimum(tl.maximum(up, -limit), limit)
            y = (up + 1.0) * (gate * tl.sigmoid(alpha * gate))
        return y
