"""The model's computed tables (the rotary table), filled on a thread beside the weight load.

On a GPU the first use of each elementwise kernel a table needs (pow, clamp, reciprocal, cos, sin, cat, ...) loads
that kernel: the rotary table took 0.14 of gpt-oss-20b's 0.18 s `build_model` on the H200, and a second build
0.03 s (`build_probe.py`, docs/benchmarks.md, 2026-11-29 fifth session). Computed on the CPU instead, the cost moved
to the first kernels of the processing phase. `TablesStart` computes the tables on a daemon thread of its own, on a
stream of its own, while the main thread loads the weights; PyTorch releases the GIL around each operator. The
model is built with `defer_tables=True`; after `join()` the runner calls `fill_rotary_tables` itself, which does
nothing when the thread filled them and computes them when it failed.

Opt-in (`QUICKMOE_TABLES_START=1`). Measured alone on the H200 it shortened the build by 0.14 s, but the load and
processing grew by as much: processing then waited longer for Triton's start (0.66-0.72 s from the CUDA init, longer
than build + load), so weights_ready did not move. Part of Triton's start is its hash of libtriton (0.36 s on the
development machine), which `QUICKMOE_TRITON_KEY_CACHE=1` (`executor/triton_key.py`) serves from the cache; the two
together are measured by `scripts/device/coldstart2.sh start-threads`.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from quickmoe.executor.background_start import BackgroundStart
from quickmoe.layers.rotary import fill_rotary_tables

__all__ = ["TablesStart", "tables_start_enabled"]

SWITCH = "QUICKMOE_TABLES_START"


def tables_start_enabled() -> bool:
    """Whether the runner computes the model's tables on a thread (`QUICKMOE_TABLES_START=1`; off by default)."""
    return os.environ.get(SWITCH, "0") == "1"


class TablesStart(BackgroundStart):
    """`fill_rotary_tables(model)` on a daemon thread (`BackgroundStart`), on its own CUDA stream."""

    name = "tables-start"

    def __init__(self, device: torch.device, model: nn.Module) -> None:
        super().__init__(device)
        self.model = model

    def work(self) -> None:
        with torch.cuda.device(self.device):
            stream = torch.cuda.Stream(self.device)
            with torch.cuda.stream(stream):
                fill_rotary_tables(self.model)
            stream.synchronize()  # the main thread reads the tables only after join()
