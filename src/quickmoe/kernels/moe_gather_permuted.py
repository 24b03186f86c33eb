"""The register-operand MoE GEMMs' activations (`kernels/moe_gemm_register.py`): each tile's rows gathered through
the alignment's `sorted_ids`, with the columns of every 64-column K step in the kernels' logical order.

Those kernels multiply a step's logical column 16 kb + 8 s + 2 q + h (k block kb, fragment half s, lane q, h = 0, 1)
with the weights' physical column `PHYSICAL_COLUMN[c]` = 16 q + 4 kb + 2 s + h, so that each lane's wgmma fragment
is two consecutive words of the weights as stored (see that module). Their activations must take the same order:
row r of the buffer made here is activation row sorted_ids[r] // top_k (GEMM 1: the token; GEMM 2, top_k 1: the
assignment's intermediate row), column 64 j + c its column 64 j + PHYSICAL_COLUMN[c]; TMA then copies [rows, 64]
boxes of it. Rows of sentinels and past the used tiles are left unwritten: their outputs are never stored. Where K is
not a multiple of 64 (a rank's down projection at tensor parallel 2 of gpt-oss: I = 1,440 = 22.5 steps) the buffer is
`padded_width(K)` wide and a column whose physical column lies past K holds zero: the last step's physical columns
below K are spread over all 64 logical ones, so the buffer cannot end at K, and the zeros meet the weights' zeros
that TMA reads past K. GEMM 2's operand in this layout is stored by GEMM 1's epilogue where both GEMMs run the
register-operand kernels (`moe_gemm1_swiglu_register(..., gathered_out=True)`); this gather makes it otherwise.
"""

from __future__ import annotations

import torch

from quickmoe.kernels.moe_align import MoEAlignment

try:  # CPU installs without triton keep the torch reference
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["PHYSICAL_COLUMN", "STEP", "gather_permuted_rows", "gather_permuted_rows_ref", "padded_width"]

STEP = 64  # K columns a step; also the gate/up group a program takes
# logical column c of a step (16 kb + 8 s + 2 q + h) -> the physical column of the weights it multiplies
PHYSICAL_COLUMN = tuple(16 * ((c >> 1) & 3) + 4 * (c >> 4) + 2 * ((c >> 3) & 1) + (c & 1) for c in range(STEP))


def padded_width(k: int) -> int:
    """The gathered buffer's width for K columns: whole steps of 64."""
    return -(-k // STEP) * STEP


def gather_permuted_rows_ref(acts: torch.Tensor, align: MoEAlignment, top_k: int) -> torch.Tensor:
    """acts [T, H] -> [capacity, padded_width(H)]: row r = acts[sorted_ids[r] // top_k] with each 64-column step's
    columns in logical order (column c of a step holds physical column PHYSICAL_COLUMN[c], zero past H); rows of
    sentinels and past the used tiles zero (the kernel leaves them unwritten: no tile reads them into a stored
    output)."""
    capacity, hidden = align.sorted_ids.numel(), acts.shape[1]
    width = padded_width(hidden)
    order = torch.tensor(PHYSICAL_COLUMN, device=acts.device)
    columns = (torch.arange(width // STEP, device=acts.device)[:, None] * STEP + order[None, :]).reshape(-1)
    padded = torch.nn.functional.pad(acts, (0, width - hidden))  # [T, width]: zeros past H
    out = torch.zeros(capacity, width, dtype=acts.dtype, device=acts.device)
    used = int(align.num_padded.item())
    ids = align.sorted_ids[:used].long()
    valid = ids < align.num_assignments
    rows = torch.arange(used, device=acts.device)[valid]
    out[rows] = padded[ids[valid] // top_k][:, columns]
    return out


def gather_permuted_rows(acts: torch.Tensor, align: MoEAlignment, top_k: int) -> torch.Tensor:
    """The Triton kernel of `gather_permuted_rows_ref` (rows of sentinels and past the used tiles unwritten)."""
    from quickmoe.kernels.pdl import pdl_kwargs

    capacity, hidden = align.sorted_ids.numel(), acts.shape[1]
    if acts.stride(1) != 1:
        raise ValueError(f"gather_permuted_rows: activations {tuple(acts.shape)} need contiguous rows")
    width = padded_width(hidden)
    out = torch.empty(capacity, width, dtype=acts.dtype, device=acts.device)
    if capacity:
        _moe_gather_permuted_kernel[(capacity,)](acts, out, align.sorted_ids, align.num_padded,
                                                 align.num_assignments, top_k, acts.stride(0), H=hidden, W=width,
                                                 BLOCK_H=triton.next_power_of_2(width), **pdl_kwargs(acts.device))
    return out


if triton is not None:
    from quickmoe.kernels.pdl import pdl_wait

    @triton.jit(do_not_specialize=["num_assignments"])
    def _moe_gather_permuted_kernel(x_ptr, out_ptr, sorted_ids_ptr, num_padded_ptr, num_assignments, top_k,
                                    stride_x, H: tl.constexpr, W: tl.constexpr, BLOCK_H: tl.constexpr,
                                    PDL: tl.constexpr):
        pdl_wait(PDL)
        row = tl.program_id(0)
        if row < tl.load(num_padded_ptr):
            assign = tl.load(sorted_ids_ptr + row)
            if assign < num_assignments:
                c = tl.arange(0, BLOCK_H)  # [BLOCK_H] logical columns
                within = c % 64  # 16 kb + 8 s + 2 q + h -> 16 q + 4 kb + 2 s + h (PHYSICAL_COLUMN)
                physical = (c - within) + 16 * ((within // 2) % 4) + 4 * (within // 16) + 2 * ((within // 8) % 2) \
                    + within % 2
                token = (assign // top_k).to(tl.int64)
                values = tl.load(x_ptr + token * stride_x + physical, mask=physical < H, other=0.0)
                tl.store(out_ptr + row.to(tl.int64) * W + c, values, mask=c < W)
