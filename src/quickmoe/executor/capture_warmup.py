"""The eager warm-up a CUDA graph capture starts with, over the fewest decoder layers that launch every kernel variant.

A capture (executor/cuda_graphs.py, executor/prefill_graphs.py) first runs its step eagerly: a Triton kernel's first
launch in a process loads its module (cuModuleLoadData), which a stream capture forbids ("operation not permitted
when stream is capturing"), and some kernels make their workspace at their first call (kernels/tickets.py). Layers
of one kind launch the same kernel variants (executor/dry_layers.py: the precompile's dry steps rest on the same
fact), so the warm-up can run only the decoder's shortest layer prefix holding every (kind, kind before) pair, 3 of
gpt-oss-20b's 24 layers, 2 of Qwen3-30B-A3B's 48; the capture then runs every layer. On the H100 (2026-12-05,
`bench coldstart`) the four start-up buckets' warm-ups took 0.28 s of the 0.56 s capture phase: ~0.15 s the first
(the modules' loads, which stay) and 0.03-0.06 s each of the others (the eager step's Python over 24 layers, which
the prefix cuts by ~7/8).

Should a capture still fail after a prefix warm-up (a launch the prefix did not make: a layer kind this module does
not tell apart), the warm-up runs again over every layer and the capture is tried once more, with a warning; a
failure then is the caller's, as before. An out-of-memory error is never retried. Compiled decoder layers
(`--compile on`) warm up over every layer: Dynamo's guards see the layer list, and a capture must not meet a
compile. So do sharded runs (several ranks): their layers hold collectives, and a retry on one rank alone would
leave the others waiting in them.

Not yet measured on a GPU (written 2026-12-05 in a session without one): off by default, on with
`QUICKMOE_CAPTURE_WARMUP=prefix` (`all`, the default, warms up over every layer as before); the A/B is
`scripts/device/coldstart2.sh capture-ab`, with its prediction in docs/runs/2026-12-05d-session/scripts/.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from typing import TypeVar

import torch

from quickmoe.errors import ConfigError
from quickmoe.executor.dry_layers import dry_layers

__all__ = ["SWITCH", "prefix_warmup_enabled", "warm_up_then_capture"]

SWITCH = "QUICKMOE_CAPTURE_WARMUP"

logger = logging.getLogger(__name__)

T = TypeVar("T")


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def prefix_warmup_enabled() -> bool:
    """Whether captures warm up over the layer prefix (`QUICKMOE_CAPTURE_WARMUP=prefix`) or every layer (`all`, the
    default until the GPU has measured the prefix)."""
    value = os.environ.get(SWITCH, "all")
    if value not in ("all", "prefix"):
        raise ConfigError(f"{SWITCH}={value!r}: expected 'all' (the default: a capture's warm-up runs every decoder "
                          "layer) or 'prefix' (the shortest layer prefix holding every layer kind)")
    return value == "prefix"


def warm_up_then_capture(runner, forward: Callable[[], object], capture: Callable[[], T], record: dict) -> T:
    """Run `forward` (the step over the graph's static buffers, reset to padding by the caller) eagerly, over the
    layer prefix when `prefix_warmup_enabled()` (else every layer), then `capture()` (the capture of the whole
    step, or its eager stand-in); returns what `capture` returns. `record` gets `warmup_s`, `capture_s` (both
    attempts' when retried), `warmup_layers` (the layers the last warm-up ran) and, after a retry, `prefix_retry`
    (the first capture's error)."""
    record.setdefault("warmup_s", 0.0)  # (first: a caller that logs a failure reads them)
    record.setdefault("capture_s", 0.0)
    total = len(runner.model.model.layers)
    use_prefix = prefix_warmup_enabled() and not runner.layers_compiled and not runner.parallel.sharded
    attempts = (True, False) if use_prefix else (False,)
    for over_prefix in attempts:
        t0 = time.perf_counter()
        group = runner.kv_cache.layer_group
        with dry_layers(runner.model, group) if over_prefix else contextlib.nullcontext(total) as ran:
            forward()
        _synchronize(runner.device)
        t1 = time.perf_counter()
        record["warmup_s"] = round(record["warmup_s"] + t1 - t0, 4)
        record["warmup_layers"] = ran
        try:
            return capture()
        except torch.OutOfMemoryError:
            raise
        except RuntimeError as exc:
            if not over_prefix or ran == total:
                raise
            record["prefix_retry"] = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            logger.warning("a CUDA graph capture after a warm-up over %d of the %d decoder layers failed (%s); warming "
                           "up over every layer and capturing again", ran, total, record["prefix_retry"])
            _synchronize(runner.device)
        finally:
            record["capture_s"] = round(record["capture_s"] + time.perf_counter() - t1, 4)
    raise AssertionError("unreachable: the last attempt returns or raises")
