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
    timer = StepTimer(torch.device("cpu"), enabled=True)  # events need CUDA: stays off on CPU
    timer.begin()
    timer.end([[1, 2, 3]])
    assert not timer.enabled and timer.summary() is None


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
