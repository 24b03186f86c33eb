"""Programmatic dependent launch (PDL, Hopper and later) for the decode step's small Triton kernels.

A kernel launched with PDL (Triton's `launch_pdl=True`: the launch attribute programmatic stream serialization)
may be scheduled before the kernel ahead of it in the stream has finished. Its programs first run `pdl_wait`
(`griddepcontrol.wait`), which returns once that kernel has completed and its writes are visible: nothing reads
or writes memory before it, so the results are those of a plain launch, and what is saved is part of the gap
between dependent kernels (a gpt-oss-20b decode step at batch 1 is ~330 kernels of a few microseconds, ~0.4 us
apart on the H100). Measured there (`hotpath.sh ab-profile`, 2026-11-24): the batch-1 step 2.650 -> 2.635 ms.
Letting the next kernel launch early as well (`griddepcontrol.launch_dependents` after the wait) made it slower
(2.64 -> 2.72 ms: its programs took the SMs' room while they waited), so the kernels do not. CUDA graphs capture
PDL launches as programmatic edges.

`pdl_kwargs(device)` gives a kernel's launch its `PDL` constexpr and the launch option; `QUICKMOE_PDL=0` in the
environment turns PDL off (a kill switch for drivers that mishandle it, not a tuning knob).
"""

from __future__ import annotations

import functools
import os

import torch

try:  # CPU installs without triton keep the torch references
    import triton
    import triton.language as tl
    from triton.language.extra.cuda import gdc_wait
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["pdl_enabled", "pdl_kwargs"]


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


if triton is not None:

    @triton.jit
    def pdl_wait(PDL: tl.constexpr):
        """The first statement of a PDL-aware kernel (see the module docstring); nothing without PDL."""
        if PDL:
            gdc_wait()
