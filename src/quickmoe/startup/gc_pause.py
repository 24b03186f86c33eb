"""The cyclic garbage collector paused while the model starts, and the heap frozen once it has.

Start-up creates objects by the hundred thousand (a Qwen3-30B-A3B FP8 checkpoint has ~37,500 tensors: header
entries, bindings, chunk pieces, views), and almost none of them is garbage; every automatic collection scans
the young ones and, now and then, every object of the process. On the development machine that was half of the
header parse (0.27 -> 0.14 s) and of the build. `paused_gc()` disables the collector for the block and restores
its previous state after (it runs again as soon as allocations call for it; nothing is frozen or leaked).

Once a serving process has started (its idle work done: graphs captured, kernels warmed), `HeapFreeze` collects
once and freezes what is left: the model's modules, parameters, graphs and tables move to the permanent
generation, so that the collector's full passes while serving scan only what requests made since. On the
development machine a full pass during a CPU `bench generate` of the embedded model took 17-136 ms over ~184,000
objects; the engine queues one step ahead, so a pass longer than a step leaves the GPU waiting for the host. On the
H200 (docs/benchmarks.md, 2026-12-03 seventh session; three rounds in turns) the full passes after start-up took
98-215 ms unfrozen and 15-105 ms frozen (most under 40 ms): a 16-layer Mixtral NVFP4's GPU idle between steps
fell from 69-77 ms (two rounds of three) to 7-10 ms, gpt-oss-20b's 256 x 1000 -> 1000 from 195-213 ms to 91-114 ms,
and output tok/s rose 0.8-1.9% in every round. On by default (`QUICKMOE_SERVING_GC=normal` turns it off); `serve`'s
HTTP frontend process freezes its own heap while the engine loads (`collect_and_freeze`): on the H200 `bench serve` at
concurrency 128 showed no difference with it, without it or with nothing frozen (2026-12-04: 8,277-8,632 output
tok/s and ITL p99 108-115 ms in all three, three rounds each).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import time
from collections.abc import Iterator

from quickmoe.errors import ConfigError

__all__ = ["HeapFreeze", "collect_and_freeze", "paused_gc", "paused_then_frozen_gc", "serving_gc_frozen",
           "startup_gc_paused"]

logger = logging.getLogger(__name__)

STARTUP_SWITCH = "QUICKMOE_STARTUP_GC"
SERVING_SWITCH = "QUICKMOE_SERVING_GC"


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


def serving_gc_frozen() -> bool:
    """Whether `quickmoe serve` and `bench generate` freeze the heap once the engine's idle work is done
    (`HeapFreeze`; `QUICKMOE_SERVING_GC=frozen`, the default since the H200's A/B in the module's docstring; `normal`
    leaves every object to the collector)."""
    value = os.environ.get(SERVING_SWITCH, "frozen")
    if value not in ("frozen", "normal"):
        raise ConfigError(f"{SERVING_SWITCH}={value!r}: expected 'frozen' (the default) or 'normal'")
    return value == "frozen"


class HeapFreeze:
    """One piece of idle work, done once when armed: `gc.collect()` (start-up's garbage cycles are freed, not
    frozen), then `gc.freeze()`. Frozen objects are still freed when their last reference goes; only the cyclic
    collector stops scanning them (a cycle among them that becomes garbage later is kept: a process that serves
    keeps its model). A library's engine is not armed: its caller's objects are not ours to freeze."""

    def __init__(self) -> None:
        self.armed = False

    def run_once(self) -> bool:
        """Collect and freeze if armed (then disarmed); False when there was nothing to do."""
        if not self.armed:
            return False
        self.armed = False
        collect_and_freeze("after the idle work")
        return True


def collect_and_freeze(when: str) -> None:
    """`gc.collect()`, then `gc.freeze()`, logged with `when`. `serve`'s HTTP frontend process (its own heap: the
    server's imports and the tokenizer, ~56,000 tracked objects, a full pass 30-54 ms on the development machine)
    calls it while the engine loads, then `gc.freeze()` alone once its app exists (a freeze without a collection is
    O(1): it moves the generations' lists)."""
    t0 = time.perf_counter()
    collected = gc.collect()
    gc.freeze()
    logger.info("heap frozen %s: %d objects in the permanent generation (%d collected) in %.3f s", when,
                gc.get_freeze_count(), collected, time.perf_counter() - t0)
