"""Start-up phases of every rank of a model spread over several, and the slowest rank's of each phase: what a
start-up across GPUs actually waits for."""

from __future__ import annotations

import torch.distributed as dist

from quickmoe.distributed import ParallelContext
from quickmoe.startup.report import StartupReport

__all__ = ["gather_rank_phases"]


def gather_rank_phases(report: StartupReport, parallel: ParallelContext) -> dict:
    """All ranks call it at the same point of their start-up: {"per_rank": [phases of rank r], "slowest":
    {phase: {"seconds", "rank"}}}, the same on every rank (one all-gather of small dicts over the CPU group)."""
    phases = {k: v for k, v in report.phases.items() if v is not None}
    gathered: list[dict | None] = [None] * parallel.world_size
    dist.all_gather_object(gathered, phases, group=parallel.cpu_group)
    slowest = {}
    for rank, rank_phases in enumerate(gathered):
        for phase, seconds in (rank_phases or {}).items():
            if phase not in slowest or seconds > slowest[phase]["seconds"]:
                slowest[phase] = {"seconds": seconds, "rank": rank}
    return {"per_rank": gathered, "slowest": slowest}
