"""Sorting the (token, expert) assignments by expert into tiles of BLOCK_M rows for the grouped GEMMs.

`moe_align_ref(topk_ids, num_experts, block_m)` -> `MoEAlignment`:
- `sorted_ids` int32 [capacity]: assignment indices a = t * k + j (token t, its j-th expert), grouped by
  expert in increasing assignment order; each expert's run is rounded up to a multiple of block_m with the
  sentinel A = T * k, so every tile of block_m rows belongs to one expert. Only this index list is padded:
  activations are never copied or padded, the GEMMs gather rows through it and mask the sentinels.
- `block_expert` int32 [capacity / block_m]: the expert of each tile, -1 past the last used tile.
- `num_padded` int32 [1]: used length of `sorted_ids` (on the device: no host synchronisation, so the
  grids are sized by `capacity` and tiles past `num_padded` exit at once, which also suits CUDA graphs).
  With `absent_last`, id E - 1 marks assignments no GEMM computes (expert parallel: another rank's, mapped one
  past the rank's experts; a CUDA graph's padding rows): its tiles come after every other expert's, and
  `num_padded` ends where they begin. (The one-program kernel counts them apart rather than as one more expert's
  bin: that bin doubled its E_POW2 at 32 and 128 experts, +0.2 ms a decode step of Qwen3-30B-A3B at batch 256.)
capacity = block_m * (A // block_m + min(E, A)): each expert adds at most one partial tile.

`moe_align_ref` is a handful of torch ops on the device (a stable sort of A ints, a scatter-add count, two
cumsums: about fifteen launches, none reading back to the host, so it can be captured in a CUDA graph).
`moe_align` (same signature) does it in one Triton program when A <= SINGLE_PROGRAM_MAX (decode batches up to
256 tokens at top-4, 128 at top-8, where the reference's launches cost as much as the GEMMs: at batch 256 they
were 2 ms of a 16 ms step). The program takes the assignments in chunks of C <= 1,024: a histogram per chunk
gives each expert's count, and one bitonic sort of the chunk's keys `expert * C + lane` puts its assignments in
the reference's order (by expert, then by index: the keys are distinct, so the sort needs no stability). The i-th
sorted assignment of a chunk goes to its expert's first row, plus the expert's assignments in earlier chunks, plus
its rank in the chunk's run (i minus the run's start: an exclusive cumulative sum of the chunk's histogram,
gathered by expert). The work is O(A log^2 C), whatever E: the earlier one-hot ranks cost O(A E) in a serial loop
of [C, E] scans, 61.5 us a call at A = 1,024 and 128 experts on the H100 (9.7 us sorted); one sort of all 4,096
assignments took 72 us at 32 experts, more than chunks of 1,024 (the network's depth grows as log^2 C, its width
is one warp's lanes).

The program's chunks run one after another, so past one chunk three launches over the chunks in parallel win (H200,
2026-12-03 second session, `scripts/probes/align_lmhead_probe.py`): at A = 2,048 one program took 17.7 us (128
experts) and 12.9 us (32 experts), the three launches 13.6 and 10.1 us; at A = 1,024 one program 10.9-12.0 and
7.1-8.2 us, the launches 13.1-14.7 and 9.7-11.5 us. So A above SINGLE_PROGRAM_MAX (one chunk) takes three
launches over chunks of SORT_CHUNK_MAX: each chunk's histogram (its program also writes a share of the sentinels),
the plan (one program per 8,192 / E tiles, each summing the histograms itself, writes its tiles' experts; the first
also every chunk's first row per expert: the expert's first padded row plus its assignments in earlier chunks),
then each chunk's sort and scatter as above. The reference's fifteen launches, a radix sort among them, took
~120 us at A = 32,768 on the H100 (gpt-oss at 8,192 tokens), a few % of the MoE layer. The kernels live in
`kernels/moe_align_kernels.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from quickmoe.kernels.pdl import pdl_kwargs

try:  # CPU installs without triton keep the torch reference
    import triton
except ImportError:  # pragma: no cover
    triton = None
else:
    from quickmoe.kernels.moe_align_kernels import (_align_count_kernel, _align_kernel, _align_plan_kernel,
                                                    _align_scatter_kernel)

__all__ = ["MoEAlignment", "moe_align", "moe_align_ref", "alignment_capacity", "align_chunk",
           "single_token_alignment", "SINGLE_PROGRAM_MAX"]

SINGLE_PROGRAM_MAX = 1024  # assignments handled by one program: one sort chunk (the kernel takes more, slower)
SORT_CHUNK_MAX = 1024  # assignments sorted together (4 keys a thread at 8 warps)
_TILE_COMPARE_ELEMENTS = 8192  # TILE_CHUNK x E per pass of the tiles' expert search: 32 registers a thread
# chunks' histograms the plan reads a load (at most _TILE_COMPARE_ELEMENTS values; from E alone, so one compiled
# plan serves every prompt size): one load a chunk made Qwen3-30B-A3B's plan at 8,192 tokens (64 chunks, 128
# experts) 24.5 us on the H200
_PLAN_CHUNK_BLOCK = 64


@dataclass(frozen=True)
class MoEAlignment:
    """See the module docstring."""

    sorted_ids: torch.Tensor  # int32 [capacity]
    block_expert: torch.Tensor  # int32 [capacity // block_m]
    num_padded: torch.Tensor  # int32 [1]
    block_m: int
    num_assignments: int  # A = T * k, also the sentinel value in sorted_ids


def alignment_capacity(num_assignments: int, num_experts: int, block_m: int) -> int:
    """Rows of `sorted_ids`: A rounded down to tiles, plus one partial tile per expert that can occur."""
    return block_m * (num_assignments // block_m + min(num_experts, num_assignments))


def moe_align_ref(topk_ids: torch.Tensor, num_experts: int, block_m: int,
                  absent_last: bool = False) -> MoEAlignment:
    """topk_ids [T, k] (any integer dtype, values in [0, E)) -> MoEAlignment (see the module docstring)."""
    if topk_ids.dim() != 2:
        raise ValueError(f"topk_ids: expected [T, k], got shape {tuple(topk_ids.shape)}")
    if block_m < 1:
        raise ValueError(f"block_m = {block_m}: expected >= 1")
    device = topk_ids.device
    flat = topk_ids.reshape(-1).long()  # [A]
    num_assignments = flat.numel()
    capacity = alignment_capacity(num_assignments, num_experts, block_m)
    # scatter_add, not bincount: bincount reads its maximum back to the host, which a CUDA graph forbids
    counts = torch.zeros(num_experts, dtype=torch.long, device=device).scatter_add_(
        0, flat, torch.ones_like(flat))  # [E]
    padded = (counts + block_m - 1) // block_m * block_m  # [E]
    padded_end = torch.cumsum(padded, 0)  # [E]
    padded_start = padded_end - padded
    order = torch.sort(flat, stable=True).indices  # [A] assignments, grouped by expert
    expert_of = flat[order]  # [A]
    run_start = torch.cumsum(counts, 0) - counts  # [E] first sorted position of each expert
    rank = torch.arange(num_assignments, device=device) - run_start[expert_of]  # [A] rank inside its run
    sorted_ids = torch.full((capacity,), num_assignments, dtype=torch.int32, device=device)
    sorted_ids[padded_start[expert_of] + rank] = order.to(torch.int32)
    tile_start = torch.arange(0, capacity, block_m, device=device)  # [capacity / block_m]
    tile_expert = torch.searchsorted(padded_end, tile_start, right=True)  # [tiles] first end past the start
    total = padded_end[-1:] if num_experts > 0 else torch.zeros(1, dtype=torch.long, device=device)
    block_expert = torch.where(tile_start < total, tile_expert, -1).to(torch.int32)
    if absent_last and num_experts > 0:  # the used rows end where the last expert's begin
        total = padded_start[-1:]
    return MoEAlignment(sorted_ids=sorted_ids, block_expert=block_expert, num_padded=total.to(torch.int32),
                        block_m=block_m, num_assignments=num_assignments)


def align_chunk(num_assignments: int) -> int:
    """The single-program kernel's sort chunk C for A assignments: A's power of two, at least 16, at most
    SORT_CHUNK_MAX. A compile-time shape: with E and block_m it names the kernel's variant (a few a model, most
    compiled by the decode graphs' capture, the rest by the idle warm-up, executor/kernel_warmup.py)."""
    return min(max(1 << max(num_assignments - 1, 0).bit_length(), 16), SORT_CHUNK_MAX)


def moe_align(topk_ids: torch.Tensor, num_experts: int, block_m: int, absent_last: bool = False) -> MoEAlignment:
    """`moe_align_ref` in Triton (identical results): one program for A <= SINGLE_PROGRAM_MAX, else one per chunk."""
    num_assignments = topk_ids.numel()
    if triton is None or num_assignments == 0 or num_experts > 256:
        return moe_align_ref(topk_ids, num_experts, block_m, absent_last)
    if topk_ids.dim() != 2:
        raise ValueError(f"topk_ids: expected [T, k], got shape {tuple(topk_ids.shape)}")
    used_experts = num_experts - 1 if absent_last else num_experts  # experts whose tiles num_padded counts
    if num_assignments > SINGLE_PROGRAM_MAX:
        return _moe_align_chunked(topk_ids, num_experts, block_m, used_experts)
    capacity = alignment_capacity(num_assignments, num_experts, block_m)
    device = topk_ids.device
    sorted_ids = torch.empty(capacity, dtype=torch.int32, device=device)
    block_expert = torch.empty(capacity // block_m, dtype=torch.int32, device=device)
    num_padded = torch.empty(1, dtype=torch.int32, device=device)
    ids = topk_ids.reshape(-1)
    absent = absent_last and num_experts > 1
    e_pow2 = triton.next_power_of_2(used_experts if absent else num_experts)  # (absent: counted apart)
    chunk = align_chunk(num_assignments)
    # tiles whose expert one pass finds: a [TILE_CHUNK, E] comparison (with 256 tiles at 128 experts it
    # spilled 1.3 KB a thread: 24 us a call on the H100, 2.5 us at 32 experts)
    tile_chunk = max(_TILE_COMPARE_ELEMENTS // e_pow2, 16)
    _align_kernel[(1,)](ids, sorted_ids, block_expert, num_padded, num_assignments, num_experts, capacity,
                        capacity // block_m, used_experts, BLOCK_M=block_m, CHUNK=chunk, E_POW2=e_pow2,
                        CAP_CHUNK=1024, TILE_CHUNK=tile_chunk, ABSENT=absent, num_warps=8, **pdl_kwargs(device))
    return MoEAlignment(sorted_ids=sorted_ids, block_expert=block_expert, num_padded=num_padded,
                        block_m=block_m, num_assignments=num_assignments)


_SINGLE_TOKEN_ROWS: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}  # (device, k, block_m) -> constants


def single_token_alignment(topk_ids: torch.Tensor, block_m: int) -> MoEAlignment | None:
    """One token's k assignments (topk_ids int32 [1, k]) as k tiles of one row each, with no kernel: tile j holds
    assignment j (then sentinels) and its expert is topk_ids[0, j], so `block_expert` is a view of topk_ids and
    `sorted_ids`, `num_padded` are constants of (k, block_m), made once per device. The tiles are not in the
    reference's expert order, which no GEMM needs (each row is written to its assignment's index), and each
    row's products are those of the sorted tile (a tile's rows never mix), so the GEMMs give the same bits as
    with `moe_align`. This is every MoE layer of a batch-1 decode step, where the alignment's launch cost
    ~2.3 us a layer of a ~2.5 ms step (docs/benchmarks.md). Repeated experts are each their own tile: still
    right. Not for ids of absent experts (expert parallel: `fused_moe` aligns those with `moe_align`). None while
    a CUDA graph is being captured before the constants exist (a copy to the device cannot be captured;
    `moe_align` serves that call)."""
    if topk_ids.dim() != 2 or topk_ids.shape[0] != 1 or topk_ids.dtype != torch.int32:
        raise ValueError(f"single_token_alignment: expected int32 topk_ids of shape [1, k], got {topk_ids.dtype} "
                         f"{tuple(topk_ids.shape)}")
    top_k = topk_ids.shape[1]
    key = (topk_ids.device, top_k, block_m)
    constants = _SINGLE_TOKEN_ROWS.get(key)
    if constants is None:
        if topk_ids.is_cuda and torch.cuda.is_current_stream_capturing():
            return None
        sorted_ids = torch.full((top_k, block_m), top_k, dtype=torch.int32)  # [k, BM]: sentinel A = k
        sorted_ids[:, 0] = torch.arange(top_k, dtype=torch.int32)
        num_padded = torch.tensor([top_k * block_m], dtype=torch.int32)
        constants = (sorted_ids.reshape(-1).to(topk_ids.device), num_padded.to(topk_ids.device))
        _SINGLE_TOKEN_ROWS[key] = constants
    sorted_ids, num_padded = constants
    return MoEAlignment(sorted_ids=sorted_ids, block_expert=topk_ids.reshape(-1), num_padded=num_padded,
                        block_m=block_m, num_assignments=top_k)


def _moe_align_chunked(topk_ids: torch.Tensor, num_experts: int, block_m: int, used_experts: int) -> MoEAlignment:
    """The alignment of prefill-sized A in three launches over chunks of SORT_CHUNK_MAX (module docstring)."""
    num_assignments = topk_ids.numel()
    capacity = alignment_capacity(num_assignments, num_experts, block_m)
    device = topk_ids.device
    chunk = SORT_CHUNK_MAX
    num_chunks = triton.cdiv(num_assignments, chunk)
    e_pow2 = triton.next_power_of_2(num_experts)
    sorted_ids = torch.empty(capacity, dtype=torch.int32, device=device)
    block_expert = torch.empty(capacity // block_m, dtype=torch.int32, device=device)
    num_padded = torch.empty(1, dtype=torch.int32, device=device)
    chunk_hist = torch.empty(num_chunks, e_pow2, dtype=torch.int32, device=device)  # each chunk's histogram
    chunk_rows = torch.empty(num_chunks, e_pow2, dtype=torch.int32, device=device)  # each chunk's first rows
    ids = topk_ids.reshape(-1)
    fill = triton.cdiv(triton.cdiv(capacity, num_chunks), 1024) * 1024  # sentinel rows per program
    pdl = pdl_kwargs(device)
    _align_count_kernel[(num_chunks,)](ids, chunk_hist, sorted_ids, num_assignments, capacity, fill, CHUNK=chunk,
                                       E_POW2=e_pow2, num_warps=8, **pdl)
    num_tiles = capacity // block_m
    tile_chunk = max(_TILE_COMPARE_ELEMENTS // e_pow2, 16)
    chunk_block = max(min(_PLAN_CHUNK_BLOCK, _TILE_COMPARE_ELEMENTS // e_pow2), 1)
    _align_plan_kernel[(triton.cdiv(num_tiles, tile_chunk),)](
        chunk_hist, chunk_rows, block_expert, num_padded, num_chunks, num_tiles, used_experts, BLOCK_M=block_m,
        E_POW2=e_pow2, TILE_CHUNK=tile_chunk, CHUNK_BLOCK=chunk_block, num_warps=8, **pdl)
    _align_scatter_kernel[(num_chunks,)](ids, chunk_rows, sorted_ids, num_assignments, CHUNK=chunk, E_POW2=e_pow2,
                                         num_warps=8, **pdl)
    return MoEAlignment(sorted_ids=sorted_ids, block_expert=block_expert, num_padded=num_padded,
                        block_m=block_m, num_assignments=num_assignments)
