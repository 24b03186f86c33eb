"""Which tile of a MoE GEMM a program takes (`tile_of`: the 1-D grid in groups of M tiles for L2 reuse) and how many of
its M tile's rows hold assignments (`valid_rows`), for `kernels/moe_gemm1_kernel.py` and `moe_gemm2_kernel.py`.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["tile_of", "valid_rows"]


@triton.jit
def tile_of(pid, num_m, num_n, group_m):
    """Program -> (M tile, N tile), in groups of group_m M tiles that sweep every N tile before the next
    group starts: while a group runs, its activation rows and the N tiles' weights stay in the L2 cache
    (one M tile at a time would re-read every activation row once per N tile)."""
    per_group = group_m * num_n
    first_m = (pid // per_group) * group_m
    rows_in_group = tl.minimum(num_m - first_m, group_m)
    return first_m + (pid % per_group) % rows_in_group, (pid % per_group) // rows_in_group


@triton.jit
def valid_rows(sorted_ids_ptr, pid_m, num_assignments, BLOCK_M: tl.constexpr):
    """How many rows of M tile pid_m hold assignments: an expert's run fills its tiles from their first row,
    so the sentinels (A) of its last tile are its last rows."""
    assign = tl.load(sorted_ids_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))  # [BM]
    return tl.sum((assign < num_assignments).to(tl.int32), axis=0)
