"""Programmatic dependent launch (PDL, Hopper and later) for the decode step's small Triton kernels.

A kernel launched with PDL (Triton's `launch_pdl=True`: the launch attribute programmatic stream serialization)
may be scheduled before the kernel ahead of it in the stream has finished. Its programs first run `pdl_wait`
(`griddepcontrol.wait`), which returns once that kernel has completed and its writes are visible: nothing reads
or writes memory before it, so the results are those of a plain launch, and what is saved is part of the gap
between dependent kernels (a gpt-oss-20b decode step at batch 1 is ~330 kernels of a few microseconds, ~0.4 us
apart on the H100). Measured there (`hotpath.sh ab-profile`, 2026-11-24): the batch-1 step 2.650 -> 2.635 ms.
Letting the next kernel launch early as well (`griddepcontrol.launch_dependents` after the wait) made it slower
(2.64 -> 2.72 ms: its programs took the SMs' room while they waited), so most kernels do not. CUDA graphs capture
PDL launches as programmatic edges.

Weights before the wait. A program may read, before its `pdl_wait`, what no kernel of the step writes: the model's
weights. So a kernel whose weights are known before its input (the router, the dense FP8 GEMV) loads its first
weight tiles, then waits. That pays only if it starts before the kernel ahead of it ends: the kernels ahead of
them (RMSNorm, the FP8 activation quantizer) call `pdl_trigger(EARLY)` first, letting the next kernel launch at
once, where `pdl_early_trigger` allows it: a grid small enough to be resident at once (a decode step's few rows),
so the early programs take no room the trigger's own programs still need. At batch 1 the norm's one program
then runs beside the router's or the GEMV's weight reads.

`pdl_kwargs(device)` gives a kernel's launch its `PDL` constexpr and the launch option; `QUICKMOE_PDL=0` in the
environment turns PDL off (a kill switch for drivers that mishandle it, not a tuning knob); `QUICKMOE_PDL_EARLY=0`
turns off only the early triggers.
"""

from __future__ import annotations

import functools
import os

import torch

try:  # CPU installs without triton keep the torch references
    import triton
    import triton.language as tl
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["pdl_early_trigger", "pdl_enabled", "pdl_kwargs"]


@functools.lru_cache(maxsize=8)
def pdl_enabled(device: torch.device) -> bool:
    """Whether kernels on `device` launch with PDL: a CUDA device of compute capability 9.0 or later, unless
    QUICKMOE_PDL=0."""
    if device.type != "cuda" or os.environ.get("QUICKMOE_PDL", "1") == "0":
        return False
    return torch.cuda.get_device_capability(device)[0] >= 9


def pdl_kwargs(device: torch.device) -> dict:
    """The launch arguments of a kernel that starts with `pdl_wait(PDL)`."""
    return {"PDL": True, "launch_pdl": True} if pdl_enabled(device) else {"PDL": False}


@functools.lru_cache(maxsize=8)
def _resident_programs(device: torch.device, warps: int) -> int:
    """Programs of `warps` warps the device could hold at once by its warp slots alone (64 a Hopper SM). Registers
    and shared memory may hold fewer: `pdl_early_trigger` keeps a margin of 4x below it."""
    props = torch.cuda.get_device_properties(device)
    warp_slots = props.max_threads_per_multi_processor // 32
    return props.multi_processor_count * max(1, warp_slots // warps)


@functools.lru_cache(maxsize=8)
def _early_enabled(device: torch.device) -> bool:
    """PDL on (`pdl_enabled`) and QUICKMOE_PDL_EARLY not 0 (read once: launches ask it on every call)."""
    return pdl_enabled(device) and os.environ.get("QUICKMOE_PDL_EARLY", "1") != "0"


def pdl_early_trigger(device: torch.device, programs: int, warps: int) -> bool:
    """Whether a kernel of `programs` programs of `warps` warps lets the kernel after it launch at once
    (`pdl_trigger`): PDL on, QUICKMOE_PDL_EARLY not 0 (`_early_enabled`), and at most a quarter of the programs the
    device can hold (`_resident_programs`), so that its programs all start at once and the next kernel's find room
    beside them."""
    return _early_enabled(device) and programs * 4 <= _resident_programs(device, warps)


if triton is not None:

    @triton.jit
    def pdl_wait(PDL: tl.constexpr):
        """The first statement of a PDL-aware kernel (see the module docstring); nothing without PDL."""
        if PDL:
            gdc_wait()

    @triton.jit
    def pdl_trigger(EARLY: tl.constexpr):
        """Lets the next kernel (if launched with PDL) start now rather than when this one's programs end
        (`griddepcontrol.launch_dependents`); nothing unless EARLY (`pdl_early_trigger`). It makes nothing of this
        kernel visible early: the next kernel's `pdl_wait` still waits for all of it."""
        if EARLY:
            gdc_launch_dependents()
