"""`StepTimer`'s split of a run's steps by kind (`bench generate` reports it): the kind rule on CPU, and on a
GPU the per-kind step counts, tokens and GPU time against a count kept by the test and the events' total."""

from __future__ import annotations

import random

import pytest
import torch

from quickmoe.executor.step_timer import StepTimer, step_kind


def test_step_kind_follows_the_rows_lengths():
    assert step_kind([1, 1, 1]) == "decode"
    assert step_kind([17]) == "prefill"
    assert step_kind([5, 2]) == "prefill"
    assert step_kind([1, 8192, 1]) == "mixed"


def test_a_timer_off_records_nothing():
    timer = StepTimer(torch.device("cpu"))
    timer.begin()
    timer.end([[1, 2, 3]])
    assert not timer.enabled and timer.summary() is None and timer.totals().steps == {}


def _timed_steps(timer: StepTimer, rng: random.Random, idle_after: int) -> list[tuple[str, int, float, float]]:
    """Run 8 CPU "steps" of random length with random gaps (one gap after mark_idle); returns, per step, its kind,
    tokens, the time inside and the gap before it (None after the idle mark), both as this function's own clock
    read them around the timer's calls (a sleep may overrun on a busy machine: the reference is what happened)."""
    import time

    plan = []
    last_end = 0.0
    for i in range(8):
        rows = [[0] * rng.choice((1, 1, 4)) for _ in range(rng.randint(1, 3))]
        inside, gap = rng.uniform(0.004, 0.008), rng.uniform(0.002, 0.004)
        if i == idle_after:
            timer.mark_idle()
            gap = 0.03
        time.sleep(gap)
        started = time.perf_counter()
        timer.begin()
        time.sleep(inside)
        timer.end(rows)
        ended = time.perf_counter()
        plan.append((step_kind([len(r) for r in rows]), sum(len(r) for r in rows), ended - started,
                     None if i in (0, idle_after) else started - last_end))
        last_end = ended
    return plan


def test_on_a_cpu_the_host_clock_times_steps_and_gaps_and_the_totals_agree_with_the_summary():
    """On a CPU the step runs while it is queued: the marks are the host's clock. The running totals (a server's,
    steps not kept) equal the summary's sums; a gap after mark_idle (waiting for requests) is not idle time."""
    rng = random.Random()
    kept = StepTimer(torch.device("cpu"), enabled=True)
    plan = _timed_steps(kept, rng, idle_after=5)
    summary = kept.summary()
    want_idle = sum(g for *_, g in plan if g is not None)
    assert summary["idle_ms_total"] / 1e3 == pytest.approx(want_idle, abs=0.004)  # the 30 ms gap is left out
    assert summary["gpu_ms_total"] / 1e3 == pytest.approx(sum(p[2] for p in plan), abs=0.004)
    totals = kept.totals()
    assert totals.steps == {k: v["steps"] for k, v in summary["by_kind"].items()}
    assert totals.tokens == {k: v["tokens"] for k, v in summary["by_kind"].items()}
    for kind, v in summary["by_kind"].items():
        assert totals.device_seconds[kind] == pytest.approx(v["gpu_ms_total"] / 1e3)
    assert totals.idle_seconds == pytest.approx(summary["idle_ms_total"] / 1e3)
    assert totals.host_seconds >= sum(totals.device_seconds.values())  # the host's span brackets the marks

    streaming = StepTimer(torch.device("cpu"), enabled=True, keep=False)
    first = _timed_steps(streaming, rng, idle_after=3)
    mid = streaming.totals()
    assert streaming.summary() is None  # not kept
    second = _timed_steps(streaming, rng, idle_after=0)  # the first gap of the second run follows an idle mark
    end = streaming.totals()
    assert sum(end.steps.values()) == 16 and sum(mid.steps.values()) == 8
    want = sum(p[2] for p in first + second)
    assert sum(end.device_seconds.values()) == pytest.approx(want, abs=0.008)
    want_idle = sum(g for *_, g in first + second if g is not None)  # the gap between the runs is idle-marked
    assert end.idle_seconds == pytest.approx(want_idle, abs=0.008)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_summary_splits_steps_by_kind_on_the_gpu():
    rng = random.Random(7)
    timer = StepTimer(torch.device("cuda"), enabled=True)
    want: dict[str, list[int]] = {}
    x = torch.randn(512, 512, device="cuda")
    for _ in range(30):
        rows = [[0] * rng.choice((1, 1, 3, 40)) for _ in range(rng.randint(1, 6))]
        timer.begin()
        for _ in range(rng.randint(1, 4)):
            x = torch.tanh(x @ x)
        timer.end(rows)
        kind = step_kind([len(r) for r in rows])
        steps, tokens = want.get(kind, [0, 0])
        want[kind] = [steps + 1, tokens + sum(len(r) for r in rows)]
    summary = timer.summary()
    got = {kind: [k["steps"], k["tokens"]] for kind, k in summary["by_kind"].items()}
    assert got == want
    total = sum(k["gpu_ms_total"] for k in summary["by_kind"].values())
    assert total == pytest.approx(summary["gpu_ms_total"], rel=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_host_side_times_queueing_and_the_step_period():
    """A host that sleeps 3 ms while queueing a step and 2 ms between steps: the medians say so (a timer that
    read the GPU's clock or timed the wrong span would not)."""
    import time

    timer = StepTimer(torch.device("cuda"), enabled=True)
    x = torch.randn(256, 256, device="cuda")
    for _ in range(12):
        timer.begin()
        x = torch.tanh(x @ x)
        time.sleep(0.003)
        timer.end([[0]])
        time.sleep(0.002)
    summary = timer.summary()
    assert 3.0 <= summary["host_queue_ms_median"] < 4.5
    assert 5.0 <= summary["host_cycle_ms_median"] < 7.0
