"""Device time per step and the device's idle time between steps (`bench generate` and the server report them).

A step records a mark when the host starts queueing its work and one after its last launch. On CUDA the marks
are events: the GPU reaches the first as soon as it is queued if it was idle, or when the previous step's work is
done if it was busy, so the time between one step's end mark and the next one's start mark is the time the GPU
waited for the host: the exposed host time. On a CPU the step runs while it is queued, so its marks are the host's
clock. The host's side is timed too (perf_counter): how long it takes to queue a step (begin to end) and how often
it starts one (begin to the next begin). A host that starts a step every c ms caps the step rate however fast the
GPU is: when c is about the GPU time per step, the host is the bottleneck (its in-step work shows as GPU time).
Steps are also told apart by kind (`step_kind`): decode (every row one token), prefill (no such row) and mixed,
with each kind's step count, tokens and device time, so a run's time can be split between prompt and output work.

Two ways to read it: `summary()` after a run (medians over every step since `reset`: waits for the device), and
`totals()` while serving (running sums of the steps the device has finished, read without waiting; the steps are
then not kept). A gap after `mark_idle()` (the host had no work: a server waiting for requests) is not counted as
the device waiting for the host.
"""

from __future__ import annotations

import itertools
import statistics
import time
from dataclasses import dataclass

import torch

from quickmoe.executor.step_totals import STEP_KINDS, StepTotals, step_kind

__all__ = ["STEP_KINDS", "StepTimer", "StepTotals", "step_kind"]

class _HostMark:
    """A step mark on a CPU device: the host's clock when the mark was made (the work before it is done)."""

    def __init__(self) -> None:
        self.t = time.perf_counter()

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, later: _HostMark) -> float:
        return 1e3 * (later.t - self.t)


@dataclass
class _Step:
    begin: object  # torch.cuda.Event or _HostMark
    end: object
    rows: int
    kind: str
    tokens: int
    host_begin: float
    host_end: float
    chained: bool  # the host went straight on from the previous step (no mark_idle between)


class StepTimer:
    """Off unless `enabled`: then `begin()` / `end()` bracket each step's launches. `keep`: keep every step for
    `summary()` (until `reset`); False (a server) keeps only those the device has not finished."""

    def __init__(self, device: torch.device, enabled: bool = False, keep: bool = True) -> None:
        self.device = device
        self.enabled = enabled
        self.keep = keep
        self._steps: list[_Step] = []
        self._next_harvest = 0  # _steps[:_next_harvest] are in the totals
        self._totals = StepTotals()
        self._last_end: object | None = None  # the end mark of the step before _steps[0] (chaining across drops)
        self._begin: object | None = None
        self._host_begin = 0.0
        self._chained = True

    def _mark(self) -> object:
        if self.device.type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return _HostMark()

    def begin(self) -> None:
        if self.enabled:
            self._host_begin = time.perf_counter()
            self._begin = self._mark()

    def end(self, token_ids: list[list[int]]) -> None:
        """After the step's last launch; token_ids: the step's rows (their lengths give its kind and tokens)."""
        if self.enabled and self._begin is not None:
            end = self._mark()
            query_lens = [len(t) for t in token_ids]
            self._steps.append(_Step(self._begin, end, len(query_lens), step_kind(query_lens), sum(query_lens),
                                     self._host_begin, time.perf_counter(), self._chained))
            self._begin, self._chained = None, True

    def mark_idle(self) -> None:
        """The host has no work now: the gap before the next step is not the device waiting for the host."""
        self._chained = False

    def reset(self) -> None:
        self._steps.clear()
        self._next_harvest, self._last_end, self._chained = 0, None, True

    def totals(self) -> StepTotals:
        """The running sums with every step the device has finished added (no wait)."""
        t = self._totals
        steps, tokens, seconds = dict(t.steps), dict(t.tokens), dict(t.device_seconds)
        idle, host = t.idle_seconds, t.host_seconds
        i = self._next_harvest
        while i < len(self._steps) and self._steps[i].end.query():
            step = self._steps[i]
            previous = self._steps[i - 1].end if i > 0 else self._last_end
            steps[step.kind] = steps.get(step.kind, 0) + 1
            tokens[step.kind] = tokens.get(step.kind, 0) + step.tokens
            seconds[step.kind] = seconds.get(step.kind, 0.0) + step.begin.elapsed_time(step.end) / 1e3
            if step.chained and previous is not None:
                idle += max(previous.elapsed_time(step.begin), 0.0) / 1e3
            host += step.host_end - step.host_begin
            i += 1
        self._totals = StepTotals(steps, tokens, seconds, idle, host)
        self._next_harvest = i
        if not self.keep and i:
            self._last_end = self._steps[i - 1].end
            del self._steps[:i]
            self._next_harvest = 0
        return self._totals

    def summary(self) -> dict | None:
        """Over the steps recorded since the last reset (waits for the device): median device ms per step, the
        device's total idle time between steps and its share of the wall time from the first step's start to the
        last one's end."""
        steps = self._steps
        if not steps:
            return None
        steps[-1].end.synchronize()
        gpu_ms = [s.begin.elapsed_time(s.end) for s in steps]
        idle_ms = [max(prev.end.elapsed_time(nxt.begin), 0.0) for prev, nxt in itertools.pairwise(steps)
                   if nxt.chained]
        wall_ms = steps[0].begin.elapsed_time(steps[-1].end)
        by_kind = {}
        for kind in STEP_KINDS:
            ms = [t for t, s in zip(gpu_ms, steps) if s.kind == kind]
            if ms:
                tenth = max(len(ms) // 10, 1)  # the first and last tenth: how the step grew with the context
                by_kind[kind] = {"steps": len(ms), "gpu_ms_total": sum(ms), "gpu_ms_median": statistics.median(ms),
                                 "gpu_ms_first_tenth_median": statistics.median(ms[:tenth]),
                                 "gpu_ms_last_tenth_median": statistics.median(ms[-tenth:]),
                                 "tokens": sum(s.tokens for s in steps if s.kind == kind)}
        return {"steps": len(steps), "gpu_ms_median": statistics.median(gpu_ms), "gpu_ms_total": sum(gpu_ms),
                "by_kind": by_kind,
                "idle_ms_total": sum(idle_ms), "idle_ms_median": statistics.median(idle_ms) if idle_ms else 0.0,
                "wall_ms": wall_ms, "exposed_host_fraction": sum(idle_ms) / wall_ms if wall_ms > 0 else 0.0,
                "batch_size_median": statistics.median(s.rows for s in steps),
                "host_queue_ms_median": 1e3 * statistics.median(s.host_end - s.host_begin for s in steps),
                "host_cycle_ms_median": 1e3 * statistics.median(
                    n.host_begin - p.host_begin for p, n in itertools.pairwise(steps)) if len(steps) > 1 else 0.0}
