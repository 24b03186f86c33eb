"""The model's computed tables (the rotary table), filled on a thread beside the weight load.

On a GPU the first use of each elementwise kernel a table needs (pow, clamp, reciprocal, cos, sin, cat, ...) loads
that kernel: the rotary table took 0.14 of gpt-oss-20b's 0.18 s `build_model` on the H200, and a second build
0.03 s (`build_probe.py`, docs/benchmarks.md, 2026-11-29 fifth session). Computed on the CPU instead, the cost moved
to the first kernels of the processing phase. `TablesStart` computes the tables on a daemon thread of its own, on a
stream of its own, while the main thread loads the weights; PyTorch releases the GIL around each operator. The
model is built with `defer_tables=True`; after `join()` the runner calls `fill_rotary_tables` itself, which does
nothing when the thread filled them and computes them when it failed.

On by default on CUDA (`QUICKMOE_TABLES_START=0` turns it off). Alone, on the H200, it shortened the build by
0.14 s while the load and processing grew by as much: processing waited for Triton's start (0.66-0.72 s from the
CUDA init, longer than build + load), so weights_ready did not move. With Triton's version key served from the
cache (`executor/triton_key.py`, 0.09 s left of that start), the build took 0.07-0.13 s against 0.17-0.24 s, and the
three start-up cuts together (this, the key, the paused collector of `startup/gc_pause.py`) gave the lowest
weights_ready of `scripts/device/coldstart2.sh start-threads`, 2.55-2.61 s against 2.89-3.12 s with none
(docs/benchmarks.md, 2026-11-29 sixth session).
"""

from __future__ import annotations

import os

import torch
from torch import nn

from quickmoe.errors import ConfigError
from quickmoe.executor.background_start import BackgroundStart
from quickmoe.layers.rotary import fill_rotary_tables

__all__ = ["TablesStart", "tables_start_enabled"]

SWITCH = "QUICKMOE_TABLES_START"


def tables_start_enabled() -> bool:
    """Whether the runner computes the model's tables on a thread on CUDA (on unless `QUICKMOE_TABLES_START=0`)."""
    value = os.environ.get(SWITCH, "1")
    if value not in ("0", "1"):
        raise ConfigError(f"{SWITCH}={value!r}: expected '1' (the default: the rotary table computed on a thread "
                          "beside the weight load) or '0' (computed in the build)")
    return value == "1"


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
