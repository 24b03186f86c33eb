"""Ticket counters: the workspace of kernels whose last program to finish a piece of work completes it.

Such a kernel (the router, `kernels/router.py`; the FP8 dense GEMM and the MoE GEMMs with K in parts,
`kernels/fp8_gemm.py`, `kernels/moe_gemm.py`) has several programs write float32 partial results for one piece of
work (`store_part`), then each takes a ticket (`last_ticket`: an atomic add with release and acquire semantics on
the piece's counter, after a barrier that orders its stores); the program that draws the last ticket reads the
others' partials in a fixed order (`sum_parts`: the same sum whichever program finished last), finishes the piece,
and sets the counter back to zero (`reset_ticket`). So the counters are zero between calls, and one launch does the
work of two without a second kernel's launch and wait.

`ticket_counters(device, name)` is one zeroed int32 workspace per (device, kernel), made on first use (never
inside a CUDA graph capture: the warm-up before a capture makes it). Calls on one device must run one at a time
(one stream), as the model's layers do.
"""

from __future__ import annotations

import torch

try:  # CPU installs without triton keep the host side
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["MAX_TICKETS", "ticket_counters"]

MAX_TICKETS = 65536  # counters per workspace: pieces of work one call can finish this way
_WORKSPACES: dict[tuple[torch.device, str], torch.Tensor] = {}


def ticket_counters(device: torch.device, name: str) -> torch.Tensor:
    """The zeroed int32 [MAX_TICKETS] counters of kernel `name` on `device` (made on the first call)."""
    key = (torch.device(device), name)
    counters = _WORKSPACES.get(key)
    if counters is None:
        if key[0].type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"{name}: first call on {key[0]} inside a CUDA graph capture; run it once eagerly "
                               "first (the warm-up before a capture does)")
        counters = _WORKSPACES[key] = torch.zeros(MAX_TICKETS, dtype=torch.int32, device=key[0])
    return counters


if triton is not None:

    @triton.jit
    def store_part(partial_ptr, slab, part, valid, ROWS: tl.constexpr, COLS: tl.constexpr):
        """Store a float32 partial result `part` [ROWS, COLS] as slab `slab` of the workspace (slabs of ROWS x COLS
        values, row-major), where `valid` (a mask broadcast to [ROWS, COLS]: the rows or columns of the tile that
        hold results; at one token a 16-row tile has one) is set: the others are never results, so neither written
        nor, by `sum_parts` with the same mask, read."""
        tile = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]  # [ROWS, COLS] offsets
        tl.store(partial_ptr + slab * (ROWS * COLS) + tile, part, mask=valid)

    @triton.jit
    def last_ticket(counter_ptr, piece, PARTS: tl.constexpr):
        """Take the piece's ticket once this program's partials are stored: whether it is the piece's last program
        (then every other partial is visible to it: release and acquire on the counter)."""
        tl.debug_barrier()  # every thread's partial is stored before the ticket is taken
        ticket = tl.atomic_add(counter_ptr + piece, 1, sem="acq_rel", scope="gpu")
        return ticket == PARTS - 1

    @triton.jit
    def sum_parts(partial_ptr, first_slab, valid, PARTS: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr,
                  SLAB_STEP: tl.constexpr = 1):
        """The sum of slabs first_slab, first_slab + SLAB_STEP, ... (PARTS of them), from zero in that order (the
        same float32 sum whichever program finished last), read through L2 (other SMs wrote them) -> [ROWS, COLS];
        only where `valid` (as `store_part` stored them; 0 elsewhere)."""
        tile = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
        total = tl.zeros([ROWS, COLS], dtype=tl.float32)
        for i in tl.static_range(PARTS):
            total += tl.load(partial_ptr + (first_slab + i * SLAB_STEP) * (ROWS * COLS) + tile, mask=valid, other=0.0,
                             cache_modifier=".cg")
        return total

    @triton.jit
    def reset_ticket(counter_ptr, piece):
        """Set the piece's counter back to zero for the next call (by its last program, after `sum_parts`)."""
        tl.atomic_xchg(counter_ptr + piece, 0, sem="relaxed", scope="gpu")
