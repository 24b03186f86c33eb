"""The Triton kernels of `kernels/moe_align.py` (the host code, the torch reference and the algorithm are there):
the one-program alignment of decode-sized batches (`_align_kernel`) and the three launches of prefill-sized ones
(`_align_count_kernel`, `_align_plan_kernel`, `_align_scatter_kernel`).
"""

from __future__ import annotations

import triton
import triton.language as tl

from quickmoe.kernels.pdl import pdl_wait


@triton.jit(do_not_specialize=["A", "capacity", "fill"])
def _align_count_kernel(ids_ptr, chunk_hist_ptr, sorted_ids_ptr, A, capacity, fill, CHUNK: tl.constexpr,
                        E_POW2: tl.constexpr, PDL: tl.constexpr):
    """Chunk c's histogram into row c of chunk_hist; sentinels into sorted_ids rows [c * fill, (c+1) * fill)."""
    pdl_wait(PDL)
    c = tl.program_id(0)
    lanes = tl.arange(0, CHUNK)
    valid = c * CHUNK + lanes < A
    ids = tl.load(ids_ptr + c * CHUNK + lanes, mask=valid, other=0).to(tl.int32)  # [C]
    tl.store(chunk_hist_ptr + c * E_POW2 + tl.arange(0, E_POW2), tl.histogram(ids, E_POW2, mask=valid))
    for s0 in range(c * fill, tl.minimum((c + 1) * fill, capacity), 1024):
        slots = s0 + tl.arange(0, 1024)
        tl.store(sorted_ids_ptr + slots, tl.full([1024], 0, tl.int32) + A, mask=slots < capacity)

@triton.jit(do_not_specialize=["num_chunks", "num_tiles", "used_experts"])
def _align_plan_kernel(chunk_hist_ptr, chunk_rows_ptr, block_expert_ptr, num_padded_ptr, num_chunks, num_tiles,
                       used_experts, BLOCK_M: tl.constexpr, E_POW2: tl.constexpr, TILE_CHUNK: tl.constexpr,
                       CHUNK_BLOCK: tl.constexpr, PDL: tl.constexpr):
    """Histograms [chunks, E] -> the experts of tiles [p * TILE_CHUNK, (p + 1) * TILE_CHUNK) (program p: each
    program sums the histograms itself); program 0 also each chunk's first row per expert and the used rows
    (of the first `used_experts` experts). One program doing every tile took ~1.3 us a pass of TILE_CHUNK
    tiles: 24.5 us for Qwen3-30B-A3B's 1,152 tiles at 8,192 tokens on the H200."""
    pdl_wait(PDL)
    p = tl.program_id(0)
    experts = tl.arange(0, E_POW2)
    rows = tl.arange(0, CHUNK_BLOCK)  # CHUNK_BLOCK chunks' histograms a load
    counts = tl.zeros([E_POW2], dtype=tl.int32)
    for c0 in range(0, num_chunks, CHUNK_BLOCK):
        ok = (c0 + rows < num_chunks)[:, None]
        counts += tl.sum(tl.load(chunk_hist_ptr + (c0 + rows)[:, None] * E_POW2 + experts[None, :], mask=ok,
                                 other=0), axis=0)  # [E]
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    padded_end = tl.cumsum(padded, axis=0)  # [E]
    total = tl.sum(padded, axis=0)
    tiles = p * TILE_CHUNK + tl.arange(0, TILE_CHUNK)  # as in _align_kernel
    tile_start = tiles * BLOCK_M
    tile_expert = tl.sum((padded_end[None, :] <= tile_start[:, None]).to(tl.int32), axis=1)
    tl.store(block_expert_ptr + tiles, tl.where(tile_start < total, tile_expert, -1), mask=tiles < num_tiles)
    if p == 0:
        first = padded_end - padded  # [E] advanced by each block of chunks' counts
        for c0 in range(0, num_chunks, CHUNK_BLOCK):
            ok = (c0 + rows < num_chunks)[:, None]
            offsets = (c0 + rows)[:, None] * E_POW2 + experts[None, :]  # [CB, E]
            hist = tl.load(chunk_hist_ptr + offsets, mask=ok, other=0)
            # chunk c's first row per expert: the block's first, plus the counts of the block's chunks before c
            tl.store(chunk_rows_ptr + offsets, first[None, :] + tl.cumsum(hist, axis=0) - hist, mask=ok)
            first += tl.sum(hist, axis=0)
        tl.store(num_padded_ptr, tl.sum(tl.where(experts < used_experts, padded, 0), axis=0))

@triton.jit(do_not_specialize=["A"])
def _align_scatter_kernel(ids_ptr, chunk_rows_ptr, sorted_ids_ptr, A, CHUNK: tl.constexpr, E_POW2: tl.constexpr,
                          PDL: tl.constexpr):
    """Chunk c's assignments sorted by (expert, index) and written from their experts' first rows for c."""
    pdl_wait(PDL)
    c = tl.program_id(0)
    lanes = tl.arange(0, CHUNK)
    valid = c * CHUNK + lanes < A
    ids = tl.load(ids_ptr + c * CHUNK + lanes, mask=valid, other=0).to(tl.int32)  # [C]
    hist = tl.histogram(ids, E_POW2, mask=valid)  # [E]
    first = tl.load(chunk_rows_ptr + c * E_POW2 + tl.arange(0, E_POW2)) - (tl.cumsum(hist, axis=0) - hist)
    keys = tl.sort(tl.where(valid, ids * CHUNK + lanes, E_POW2 * CHUNK))  # [C], as in _align_kernel
    expert_of = tl.minimum(keys // CHUNK, E_POW2 - 1)
    row = lanes + tl.gather(first, expert_of, 0)  # [C]
    tl.store(sorted_ids_ptr + row, c * CHUNK + keys % CHUNK, mask=valid)  # valid lanes: a prefix

@triton.jit(do_not_specialize=["A", "capacity", "num_tiles", "used_experts"])
def _align_kernel(ids_ptr, sorted_ids_ptr, block_expert_ptr, num_padded_ptr, A, E, capacity, num_tiles,
                  used_experts, BLOCK_M: tl.constexpr, CHUNK: tl.constexpr, E_POW2: tl.constexpr,
                  CAP_CHUNK: tl.constexpr, TILE_CHUNK: tl.constexpr, ABSENT: tl.constexpr, PDL: tl.constexpr):
    """ABSENT (absent_last): id used_experts (= E - 1) is the absent one. Its assignments are counted apart
    (E_POW2 covers the used experts only: an extra bin doubled E_POW2 for 32 or 128 experts, and with it the
    histograms and the tiles' expert search) and placed after every used expert's tiles, in index order, as
    the reference places the last expert's."""
    pdl_wait(PDL)
    lanes = tl.arange(0, CHUNK)
    counts = tl.zeros([E_POW2], dtype=tl.int32)  # pass 1: each expert's assignments
    num_absent = 0
    for c0 in range(0, A, CHUNK):
        valid = c0 + lanes < A
        ids = tl.load(ids_ptr + c0 + lanes, mask=valid, other=0).to(tl.int32)  # [C]
        if ABSENT:
            present = valid & (ids < used_experts)
            num_absent += tl.sum((valid & ~present).to(tl.int32), axis=0)
            ids = tl.where(present, ids, 0)
        else:
            present = valid
        counts += tl.histogram(ids, E_POW2, mask=present)  # [E]
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    padded_end = tl.cumsum(padded, axis=0)  # [E]
    used_total = tl.sum(tl.where(tl.arange(0, E_POW2) < used_experts, padded, 0), axis=0)
    total = tl.sum(padded, axis=0) + (num_absent + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    for s0 in range(0, capacity, CAP_CHUNK):  # every row a sentinel first
        slots = s0 + tl.arange(0, CAP_CHUNK)
        tl.store(sorted_ids_ptr + slots, tl.full([CAP_CHUNK], 0, tl.int32) + A, mask=slots < capacity)
    tl.debug_barrier()  # the sentinels land before the assignments overwrite their rows
    # pass 2: the chunk's i-th sorted assignment goes to row i + first[e], where first[e] = its expert's first
    # row + the expert's assignments in earlier chunks - the start of the expert's run in the sorted chunk
    first = padded_end - padded  # [E] (advanced by each chunk's counts)
    absent_first = used_total  # (ABSENT) the next absent assignment's row
    for c0 in range(0, A, CHUNK):
        valid = c0 + lanes < A
        ids = tl.load(ids_ptr + c0 + lanes, mask=valid, other=0).to(tl.int32)  # [C]
        if ABSENT:
            present = valid & (ids < used_experts)
        else:
            present = valid
        hist = tl.histogram(tl.where(present, ids, 0), E_POW2, mask=present)  # [E]
        run_start = tl.cumsum(hist, axis=0) - hist  # [E]
        # by expert, then by index; absent lanes after them (key E_POW2 * C + lane), masked lanes last
        keys = tl.sort(tl.where(present, ids * CHUNK + lanes,
                                tl.where(valid, E_POW2 * CHUNK + lanes, (E_POW2 + 1) * CHUNK)))  # [C]
        expert_of = tl.minimum(keys // CHUNK, E_POW2 - 1)  # [C] (absent and masked lanes: rows below)
        num_present = tl.sum(hist, axis=0)
        row = lanes + tl.gather(first - run_start, expert_of, 0)  # [C]
        if ABSENT:
            row = tl.where(lanes < num_present, row, absent_first + lanes - num_present)
            absent_first += tl.sum(valid.to(tl.int32), axis=0) - num_present
        tl.store(sorted_ids_ptr + row, c0 + keys % CHUNK, mask=valid)  # the first valid-count keys are real
        first += hist
    for t0 in range(0, num_tiles, TILE_CHUNK):
        tiles = t0 + tl.arange(0, TILE_CHUNK)
        tile_start = tiles * BLOCK_M
        # the tile's expert: how many experts' runs end at or before its first row (unused experts end
        # where the previous one does, so they are skipped)
        tile_expert = tl.sum((padded_end[None, :] <= tile_start[:, None]).to(tl.int32), axis=1)
        if ABSENT:  # the absent assignments' tiles
            tile_expert = tl.where(tile_start >= used_total, used_experts, tile_expert)
        tl.store(block_expert_ptr + tiles, tl.where(tile_start < total, tile_expert, -1), mask=tiles < num_tiles)
    # the used rows: every expert's tiles, or (absent_last) all but the absent ones', which come after the others
    tl.store(num_padded_ptr, used_total)
