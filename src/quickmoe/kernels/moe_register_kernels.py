"""The Gluon kernels of the register-operand MoE GEMMs (`kernels/moe_gemm_register.py` launches them and holds
their torch references): GEMM 1 + gpt-oss's SwiGLU, and GEMM 2 with the bias and the routing weight, each a tile
of one expert's assignment rows over the K loop of `moe_register_k_loop` (the decoded MXFP4 weights as wgmma's
register operand). Gluon has no CPU interpreter: the tests compare them with the references on a Hopper GPU.
"""

from __future__ import annotations

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    from quickmoe.kernels.moe_register_k_loop import ACC_SCALE, k_loop
except ImportError:  # pragma: no cover - a triton without Gluon
    gluon = None

__all__: list[str] = []  # the launchers in moe_gemm_register.py import the kernels


if gluon is not None:
    @gluon.jit
    def _gemm1_tile(x_desc, w_desc, s_ptr, bias_ptr, out_ptr, sorted_ids_ptr, expert, x_row, group, size,
                    num_assignments, limit, alpha, H: gl.constexpr, I: gl.constexpr, TOK: gl.constexpr,
                    STAGES: gl.constexpr, HAS_BIAS: gl.constexpr, TWO_BOXES: gl.constexpr, SUB: gl.constexpr,
                    GATHERED: gl.constexpr):
        """GEMM 1 + SwiGLU of TOK rows of the permuted activations from x_row (one expert's tile) and gate/up group
        `group` of w1: its `size` gate rows then its `size` up rows (size = 64 but in a ragged last group, whose
        weights come as TWO_BOXES of 64 rows, from w_desc's). Stored to rows of inter [A, I], or (GATHERED) to the
        tile's own rows of GEMM 2's operand [capacity, padded_width(I)]: I-column 64 group + c at column 64 group +
        the logical position of physical column c (the inverse of `PHYSICAL_COLUMN`), zeros for c >= size."""
        N: gl.constexpr = 2 * I
        acc = k_loop(x_desc, w_desc, s_ptr, expert, x_row, group * 128, size, H, N, TOK, STAGES, TWO_BOXES, SUB)
        # rows 0-63 gate, 64-127 up: row r and r + 64 lie in one thread (wgmma's 64-row halves)
        both = gl.permute(gl.reshape(acc * ACC_SCALE, (2, 64, TOK)), (1, 2, 0))  # [64, TOK, 2]
        gate, up = gl.split(both)  # [64, TOK] each
        EPI: gl.constexpr = gate.type.layout
        cols = gl.arange(0, 64, layout=gl.SliceLayout(1, EPI))
        col_ok = cols < size
        if HAS_BIAS:
            gate += gl.expand_dims(gl.load(bias_ptr + expert * N + group * 128 + cols, mask=col_ok,
                                           other=0.0).to(gl.float32), 1)
            up += gl.expand_dims(gl.load(bias_ptr + expert * N + group * 128 + size + cols, mask=col_ok,
                                         other=0.0).to(gl.float32), 1)
        gate = gl.minimum(gate, limit)
        up = gl.minimum(gl.maximum(up, -limit), limit)
        y = (up + 1.0) * (gate / (1.0 + gl.exp(-alpha * gate)))
        if GATHERED:
            # physical column c = 16 q + 4 kb + 2 s + h is multiplied with logical column 16 kb + 8 s + 2 q + h:
            # [64 (q, kb, s, h), TOK] -> [TOK, 64 (kb, s, q, h)], then rows of 8 logical columns a thread (16 bytes)
            y = gl.where(gl.expand_dims(col_ok, 1), y, 0.0).to(gl.bfloat16)  # a ragged group's columns past I: 0
            z = gl.reshape(gl.permute(gl.reshape(y, (4, 4, 2, 2, TOK)), (4, 1, 2, 0, 3)), (TOK, 64))
            ST: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
            z = gl.convert_layout(z, ST)
            tok = gl.arange(0, TOK, layout=gl.SliceLayout(1, ST))
            pos = gl.arange(0, 64, layout=gl.SliceLayout(0, ST))
            assign = gl.load(sorted_ids_ptr + x_row + tok)
            WIDTH: gl.constexpr = (I + 63) // 64 * 64
            ptrs = (out_ptr + gl.expand_dims((x_row + tok).to(gl.int64) * WIDTH, 1)
                    + gl.expand_dims(group * 64 + pos, 0))
            ok = gl.broadcast(gl.expand_dims(assign < num_assignments, 1), ptrs)[0]  # whole rows: 16-byte stores
            gl.store(ptrs, z, mask=ok)
        else:
            assign = gl.load(sorted_ids_ptr + x_row + gl.arange(0, TOK, layout=gl.SliceLayout(0, EPI)))
            ok = gl.expand_dims(assign < num_assignments, 0) & gl.expand_dims(col_ok, 1)
            ptrs = out_ptr + gl.expand_dims(assign.to(gl.int64) * I, 0) + gl.expand_dims(group * 64 + cols, 1)
            gl.store(ptrs, y.to(gl.bfloat16), mask=ok)

    @gluon.jit(do_not_specialize=["num_assignments", "num_m"])
    def _gemm1_register_kernel(x_desc, x_half_desc, w_desc, w_rows_desc, s_ptr, bias_ptr, out_ptr, sorted_ids_ptr,
                               block_expert_ptr, num_padded_ptr, num_assignments, num_m, limit, alpha, H: gl.constexpr,
                               I: gl.constexpr, BM: gl.constexpr, HALF: gl.constexpr, STAGES: gl.constexpr,
                               HAS_BIAS: gl.constexpr, RAGGED: gl.constexpr, SUB: gl.constexpr,
                               GATHERED: gl.constexpr, num_warps: gl.constexpr):
        """w_desc: boxes of 128 weight rows; w_rows_desc: of 64 (RAGGED: I is not whole groups of 64, and the last
        group's programs load its gate and up rows as two boxes)."""
        pid = gl.program_id(0)
        pid_m = pid % num_m  # the M tiles of a group run together: an expert's tiles share its weights in L2
        group = pid // num_m
        if pid_m * BM < gl.load(num_padded_ptr):
            expert = gl.load(block_expert_ptr + pid_m).to(gl.int64)
            ids = gl.load(sorted_ids_ptr + pid_m * BM + gl.arange(0, BM, layout=gl.BlockedLayout([1], [32], [4], [0])))
            valid = gl.sum((ids < num_assignments).to(gl.int32), axis=0)  # an expert's run fills its tiles in order
            size = gl.minimum(I - group * 64, 64)
            if RAGGED and size < 64:
                if valid <= HALF:
                    _gemm1_tile(x_half_desc, w_rows_desc, s_ptr, bias_ptr, out_ptr, sorted_ids_ptr, expert, pid_m * BM,
                                group, size, num_assignments, limit, alpha, H, I, HALF, STAGES, HAS_BIAS, True, SUB,
                                GATHERED)
                else:
                    _gemm1_tile(x_desc, w_rows_desc, s_ptr, bias_ptr, out_ptr, sorted_ids_ptr, expert, pid_m * BM,
                                group, size, num_assignments, limit, alpha, H, I, BM, STAGES, HAS_BIAS, True, SUB,
                                GATHERED)
            elif valid <= HALF:
                _gemm1_tile(x_half_desc, w_desc, s_ptr, bias_ptr, out_ptr, sorted_ids_ptr, expert, pid_m * BM, group,
                            64, num_assignments, limit, alpha, H, I, HALF, STAGES, HAS_BIAS, False, SUB, GATHERED)
            else:
                _gemm1_tile(x_desc, w_desc, s_ptr, bias_ptr, out_ptr, sorted_ids_ptr, expert, pid_m * BM, group,
                            64, num_assignments, limit, alpha, H, I, BM, STAGES, HAS_BIAS, False, SUB, GATHERED)

    @gluon.jit
    def _gemm2_tile(x_desc, w_desc, s_ptr, bias_ptr, route_w_ptr, out_ptr, sorted_ids_ptr, expert, x_row, n0,
                    num_assignments, H: gl.constexpr, I: gl.constexpr, TOK: gl.constexpr, STAGES: gl.constexpr,
                    HAS_BIAS: gl.constexpr, SUB: gl.constexpr):
        """GEMM 2 of TOK rows of the permuted intermediate from x_row (one expert's tile) and output columns n0 ..
        n0 + 127: (inter @ W2^T + b2) x each assignment's routing weight, stored to rows of [A, H]."""
        acc = k_loop(x_desc, w_desc, s_ptr, expert, x_row, n0, 64, I, H, TOK, STAGES, False, SUB)
        acc = acc * ACC_SCALE  # [128, TOK]
        EPI: gl.constexpr = acc.type.layout
        rows = n0 + gl.arange(0, 128, layout=gl.SliceLayout(1, EPI))
        row_ok = rows < H
        if HAS_BIAS:
            acc += gl.expand_dims(gl.load(bias_ptr + expert * H + rows, mask=row_ok, other=0.0).to(gl.float32), 1)
        assign = gl.load(sorted_ids_ptr + x_row + gl.arange(0, TOK, layout=gl.SliceLayout(0, EPI)))
        ok = assign < num_assignments
        acc *= gl.expand_dims(gl.load(route_w_ptr + assign, mask=ok, other=0.0).to(gl.float32), 0)
        # [128 columns, TOK] -> [TOK, 128] through shared memory: 8 consecutive columns of an assignment's row a
        # thread, one 16-byte store (in wgmma's layout a store instruction wrote 2 bytes at 8 columns of 4 rows)
        ST: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [4, 1], [1, 0])
        out = gl.convert_layout(gl.permute(acc.to(gl.bfloat16), (1, 0)), ST)
        tok = gl.arange(0, TOK, layout=gl.SliceLayout(1, ST))
        cols = n0 + gl.arange(0, 128, layout=gl.SliceLayout(0, ST))
        assign = gl.load(sorted_ids_ptr + x_row + tok)
        ptrs = out_ptr + gl.expand_dims(assign.to(gl.int64) * H, 1) + gl.expand_dims(cols, 0)
        gl.store(ptrs, out, mask=gl.expand_dims(assign < num_assignments, 1) & gl.expand_dims(cols < H, 0))

    @gluon.jit(do_not_specialize=["num_assignments", "num_m"])
    def _gemm2_register_kernel(x_desc, x_half_desc, w_desc, s_ptr, bias_ptr, route_w_ptr, out_ptr, sorted_ids_ptr,
                               block_expert_ptr, num_padded_ptr, num_assignments, num_m, H: gl.constexpr,
                               I: gl.constexpr, BM: gl.constexpr, HALF: gl.constexpr, STAGES: gl.constexpr,
                               HAS_BIAS: gl.constexpr, SUB: gl.constexpr, num_warps: gl.constexpr):
        pid = gl.program_id(0)
        pid_m = pid % num_m
        n0 = (pid // num_m) * 128
        if pid_m * BM < gl.load(num_padded_ptr):
            expert = gl.load(block_expert_ptr + pid_m).to(gl.int64)
            ids = gl.load(sorted_ids_ptr + pid_m * BM + gl.arange(0, BM, layout=gl.BlockedLayout([1], [32], [4], [0])))
            valid = gl.sum((ids < num_assignments).to(gl.int32), axis=0)
            if valid <= HALF:
                _gemm2_tile(x_half_desc, w_desc, s_ptr, bias_ptr, route_w_ptr, out_ptr, sorted_ids_ptr, expert,
                            pid_m * BM, n0, num_assignments, H, I, HALF, STAGES, HAS_BIAS, SUB)
            else:
                _gemm2_tile(x_desc, w_desc, s_ptr, bias_ptr, route_w_ptr, out_ptr, sorted_ids_ptr, expert,
                            pid_m * BM, n0, num_assignments, H, I, BM, STAGES, HAS_BIAS, SUB)
