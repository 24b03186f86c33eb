"""Sorting the (token, expert) assignments by expert into tiles of BLOCK_M rows for the grouped GEMMs.

`moe_align_ref(topk_ids, num_experts, block_m)` -> `MoEAlignment`:
- `sorted_ids` int32 [capacity]: assignment indices a = t * k + j (token t, its j-th expert), grouped by
  expert in increasing assignment order; each expert's run is rounded up to a multiple of block_m with the
  sentinel A = T * k, so every tile of block_m rows belongs to one expert. Only this index list is padded:
  activations are never copied or padded, the GEMMs gather rows through it and mask the sentinels.
- `block_expert` int32 [capacity / block_m]: the expert of each tile, -1 past the last used tile.
- `num_padded` int32 [1]: used length of `sorted_ids` (on the device: no host synchronisation, so the
  grids are sized by `capacity` and tiles past `num_padded` exit at once, which also suits CUDA graphs).
capacity = block_m * (A // block_m + min(E, A)): each expert adds at most one partial tile.

Everything is a handful of torch ops on the device (a stable sort of A ints, a bincount, two cumsums);
the Triton kernel of the MoE issue that replaces it keeps this signature.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["MoEAlignment", "moe_align_ref", "alignment_capacity"]


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


def moe_align_ref(topk_ids: torch.Tensor, num_experts: int, block_m: int) -> MoEAlignment:
    """topk_ids [T, k] (any integer dtype, values in [0, E)) -> MoEAlignment (see the module docstring)."""
    if topk_ids.dim() != 2:
        raise ValueError(f"topk_ids: expected [T, k], got shape {tuple(topk_ids.shape)}")
    if block_m < 1:
        raise ValueError(f"block_m = {block_m}: expected >= 1")
    device = topk_ids.device
    flat = topk_ids.reshape(-1).long()  # [A]
    num_assignments = flat.numel()
    capacity = alignment_capacity(num_assignments, num_experts, block_m)
    counts = torch.bincount(flat, minlength=num_experts)  # [E]
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
    return MoEAlignment(sorted_ids=sorted_ids, block_expert=block_expert, num_padded=total.to(torch.int32),
                        block_m=block_m, num_assignments=num_assignments)
