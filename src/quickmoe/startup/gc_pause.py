"""The cyclic garbage collector paused while the model starts.

Start-up creates objects by the hundred thousand (a Qwen3-30B-A3B FP8 checkpoint has ~37,500 tensors: header
entries, bindings, chunk pieces, views), and almost none of them is garbage; every automatic collection scans
the young ones and, now and then, every object of the process. On the development machine that was half of the
header parse (0.27 -> 0.14 s) and of the build. `paused_gc()` disables the collector for the block and restores
its previous state after (it runs again as soon as allocations call for it; nothing is frozen or leaked).
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator

from quickmoe.errors import ConfigError

__all__ = ["paused_gc", "paused_then_frozen_gc", "startup_gc_paused"]

STARTUP_SWITCH = "QUICKMOE_STARTUP_GC"


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Disable automatic garbage collection inside the block, then restore it if it was on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def paused_then_frozen_gc() -> Iterator[None]:
    """`paused_gc()`, then `gc.freeze()`: what the block allocated and still holds (modules, classes, functions of
    imports) moves to the permanent generation, which later collections never scan. Paused without the freeze,
    those objects stay young until the collector runs again, and its next collections scan them all: on the
    development machine Dynamo's tracing after paused imports took 0.6-1.2 s longer."""
    with paused_gc():
        yield
        gc.freeze()


def startup_gc_paused() -> bool:
    """Whether the `quickmoe` command pauses the collector through its imports and `--compile`'s imports, freezing
    what they made after (`paused_then_frozen_gc`; `QUICKMOE_STARTUP_GC=paused`, the default; `normal` leaves them
    to the collector). Importing torch, triton, quickmoe, Dynamo and Inductor makes objects by the million, few of
    them garbage. On the development machine (fresh processes, in turns;
    docs/runs/2026-11-29e-session/cpu_startup_gc.txt) `quickmoe generate`'s imports phase took 2.00-2.24 s against
    2.18-2.69 s, and with `--compile on` the compile phase 4.15-5.20 s against 5.94-6.62 s. On the H200 it was part
    of the fastest start measured (docs/benchmarks.md, 2026-11-29 sixth session: weights_ready 2.55-2.61 s with the
    Triton key and the tables' thread, 2.89-3.12 s with none; alone it moved nothing beyond the runs' spread)."""
    value = os.environ.get(STARTUP_SWITCH, "paused")
    if value not in ("paused", "normal"):
        raise ConfigError(f"{STARTUP_SWITCH}={value!r}: expected 'paused' (the default) or 'normal'")
    return value == "paused"
