"""GPU time per step and the GPU's idle time between steps, from CUDA events (`bench generate` reports them).

A step records an event when the host starts queueing its work and one after its last launch. The GPU
reaches the first event as soon as it is queued if it was idle, or when the previous step's work is done if
it was busy, so the time between one step's end event and the next one's start event is the time the GPU
waited for the host: the exposed host time. Events are read after the run (`summary`), never during it.
The host's side is timed too (perf_counter): how long it takes to queue a step (begin to end) and how often it
starts one (begin to the next begin). A host that starts a step every c ms caps the step rate however fast the
GPU is: when c is about the GPU time per step, the host is the bottleneck (its in-step work shows as GPU time).
Steps are also told apart by kind (`step_kind`): decode (every row one token), prefill (no such row) and mixed,
with each kind's step count, tokens and GPU time, so a run's time can be split between prompt and output work.
"""

from __future__ import annotations

import itertools
import statistics
import time

import torch

__all__ = ["STEP_KINDS", "StepTimer", "step_kind"]

STEP_KINDS = ("decode", "mixed", "prefill")


def step_kind(query_lens: list[int]) -> str:
    """"decode" when every row brings one token, "prefill" when none does, else "mixed"."""
    single = sum(1 for n in query_lens if n == 1)
    return "decode" if single == len(query_lens) else "prefill" if single == 0 else "mixed"


class StepTimer:
    """Off unless `enabled` (and a CUDA device): then `begin()` / `end()` bracket each step's launches."""

    def __init__(self, device: torch.device, enabled: bool = False) -> None:
        self.enabled = enabled and device.type == "cuda"
        self._pairs: list[tuple[torch.cuda.Event, torch.cuda.Event, int]] = []
        self._kinds: list[tuple[str, int]] = []  # per step: its kind and its tokens
        self._begin: torch.cuda.Event | None = None
        self._host: list[tuple[float, float]] = []  # per step: perf_counter at begin and at end
        self._host_begin = 0.0

    def begin(self) -> None:
        if self.enabled:
            self._host_begin = time.perf_counter()
            self._begin = torch.cuda.Event(enable_timing=True)
            self._begin.record()

    def end(self, token_ids: list[list[int]]) -> None:
        """After the step's last launch; token_ids: the step's rows (their lengths give its kind and tokens)."""
        if self.enabled and self._begin is not None:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            query_lens = [len(t) for t in token_ids]
            self._pairs.append((self._begin, end, len(query_lens)))
            self._host.append((self._host_begin, time.perf_counter()))
            self._kinds.append((step_kind(query_lens), sum(query_lens)))
            self._begin = None

    def reset(self) -> None:
        self._pairs.clear()
        self._kinds.clear()
        self._host.clear()

    def summary(self) -> dict | None:
        """Over the steps recorded since the last reset: median GPU ms per step, the GPU's total idle time
        between steps and its share of the wall time from the first step's start to the last one's end."""
        if not self._pairs:
            return None
        self._pairs[-1][1].synchronize()
        gpu_ms = [b.elapsed_time(e) for b, e, _ in self._pairs]
        idle_ms = [max(prev[1].elapsed_time(nxt[0]), 0.0) for prev, nxt in zip(self._pairs, self._pairs[1:])]
        wall_ms = self._pairs[0][0].elapsed_time(self._pairs[-1][1])
        by_kind = {}
        for kind in STEP_KINDS:
            ms = [t for t, (k, _) in zip(gpu_ms, self._kinds) if k == kind]
            if ms:
                by_kind[kind] = {"steps": len(ms), "gpu_ms_total": sum(ms), "gpu_ms_median": statistics.median(ms),
                                 "tokens": sum(n for k, n in self._kinds if k == kind)}
        return {"steps": len(self._pairs), "gpu_ms_median": statistics.median(gpu_ms), "gpu_ms_total": sum(gpu_ms),
                "by_kind": by_kind,
                "idle_ms_total": sum(idle_ms), "idle_ms_median": statistics.median(idle_ms) if idle_ms else 0.0,
                "wall_ms": wall_ms, "exposed_host_fraction": sum(idle_ms) / wall_ms if wall_ms > 0 else 0.0,
                "batch_size_median": statistics.median(n for _, _, n in self._pairs),
                "host_queue_ms_median": 1e3 * statistics.median(e - b for b, e in self._host),
                "host_cycle_ms_median": 1e3 * statistics.median(
                    n[0] - p[0] for p, n in itertools.pairwise(self._host)) if len(self._host) > 1 else 0.0}
