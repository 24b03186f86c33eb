"""GPU time per step and the GPU's idle time between steps, from CUDA events (`bench generate` reports them).

A step records an event when the host starts queueing its work and one after its last launch. The GPU
reaches the first event as soon as it is queued if it was idle, or when the previous step's work is done if
it was busy, so the time between one step's end event and the next one's start event is the time the GPU
waited for the host: the exposed host time. Events are read after the run (`summary`), never during it.
"""

from __future__ import annotations

import statistics

import torch

__all__ = ["StepTimer"]


class StepTimer:
    """Off unless `enabled` (and a CUDA device): then `begin()` / `end()` bracket each step's launches."""

    def __init__(self, device: torch.device, enabled: bool = False) -> None:
        self.enabled = enabled and device.type == "cuda"
        self._pairs: list[tuple[torch.cuda.Event, torch.cuda.Event, int]] = []
        self._begin: torch.cuda.Event | None = None

    def begin(self) -> None:
        if self.enabled:
            self._begin = torch.cuda.Event(enable_timing=True)
            self._begin.record()

    def end(self, batch_size: int) -> None:
        if self.enabled and self._begin is not None:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self._pairs.append((self._begin, end, batch_size))
            self._begin = None

    def reset(self) -> None:
        self._pairs.clear()

    def summary(self) -> dict | None:
        """Over the steps recorded since the last reset: median GPU ms per step, the GPU's total idle time
        between steps and its share of the wall time from the first step's start to the last one's end."""
        if not self._pairs:
            return None
        self._pairs[-1][1].synchronize()
        gpu_ms = [b.elapsed_time(e) for b, e, _ in self._pairs]
        idle_ms = [max(prev[1].elapsed_time(nxt[0]), 0.0) for prev, nxt in zip(self._pairs, self._pairs[1:])]
        wall_ms = self._pairs[0][0].elapsed_time(self._pairs[-1][1])
        return {"steps": len(self._pairs), "gpu_ms_median": statistics.median(gpu_ms), "gpu_ms_total": sum(gpu_ms),
                "idle_ms_total": sum(idle_ms), "idle_ms_median": statistics.median(idle_ms) if idle_ms else 0.0,
                "wall_ms": wall_ms, "exposed_host_fraction": sum(idle_ms) / wall_ms if wall_ms > 0 else 0.0,
                "batch_size_median": statistics.median(n for _, _, n in self._pairs)}
