"""Ticket counters: the workspace of kernels whose last program to finish a piece of work completes it.

Such a kernel (the router, `kernels/router.py`; decode attention's combine, `kernels/decode_attention.py`) has
several programs write partial results for one piece of work, then each takes a ticket (an atomic add with
release and acquire semantics on the piece's counter, after a barrier that orders its stores); the program
that draws the last ticket reads the others' partials in a fixed order, finishes the piece, and sets the counter
back to zero. So the counters are zero between calls, and one launch does the work of two without a second
kernel's launch and wait.

`ticket_counters(device, name)` is one zeroed int32 workspace per (device, kernel), made on first use (never
inside a CUDA graph capture: the warm-up before a capture makes it). Calls on one device must run one at a time
(one stream), as the model's layers do.
"""

from __future__ import annotations

import torch

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
