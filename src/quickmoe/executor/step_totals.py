"""The step kinds and the running sums of a StepTimer (executor/step_timer.py), torch-free: a server's HTTP frontend
receives them from the engine's process and shows them in /metrics without importing torch."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["STEP_KINDS", "StepTotals", "step_kind"]

STEP_KINDS = ("decode", "mixed", "prefill")


def step_kind(query_lens: list[int]) -> str:
    """"decode" when every row brings one token, "prefill" when none does, else "mixed"."""
    single = sum(1 for n in query_lens if n == 1)
    return "decode" if single == len(query_lens) else "prefill" if single == 0 else "mixed"


@dataclass(frozen=True)
class StepTotals:
    """Running sums over the steps the device has finished, by kind (`STEP_KINDS`): steps, tokens, device seconds;
    and over all of them: the device's idle seconds between consecutive steps of busy stretches (waiting for the
    host) and the host's seconds queueing steps."""

    steps: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    device_seconds: dict[str, float] = field(default_factory=dict)
    idle_seconds: float = 0.0
    host_seconds: float = 0.0
