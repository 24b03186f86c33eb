"""How the ranks of a model spread over several processes stop: every rank destroys its CUDA graphs before it leaves
the process groups, and rank 0 leaves them before it waits for the ranks it spawned to exit. Both were found on two
H200s (`bench generate -tp 2` printed its table, then hung until killed; py-spy: both ranks in ncclCommFinalize):
NCCL's teardown waits for the graphs that captured its collectives, and is collective among a host's ranks. gloo's
teardown is neither, so the CPU runs of tests/distributed cannot tell right from wrong; these tests record the
order of the calls."""

from __future__ import annotations

import threading

import quickmoe.distributed.env as distributed_env
import quickmoe.executor.workers as workers
from quickmoe.distributed import ParallelContext
from quickmoe.executor.launch import Ranks
from quickmoe.llm import LLM


class _Spawned:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.stopping = threading.Event()

    def join(self, timeout_s: float = 30.0) -> None:
        self.calls.append("join")


class _Runner:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def stop_workers(self) -> None:
        self.calls.append("stop_workers")

    def release_graphs(self) -> None:
        self.calls.append("release_graphs")

    def execute(self, *args, **kwargs) -> None:
        self.calls.append(f"execute{args}")


def test_rank_0_releases_its_graphs_and_leaves_the_groups_before_it_waits_for_the_spawned_ranks(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(distributed_env, "close_parallel", lambda: calls.append("close_parallel"))
    llm = object.__new__(LLM)  # only what shutdown reads: no model
    spawned = _Spawned(calls)
    llm._ranks = Ranks(parallel=None, spawned=spawned)
    llm.runner = _Runner(calls)
    llm.shutdown()
    assert calls == ["stop_workers", "release_graphs", "close_parallel", "join"]
    assert spawned.stopping.is_set()  # the rank watch takes their exits as the stop asked for
    llm.shutdown()  # idempotent
    assert calls == ["stop_workers", "release_graphs", "close_parallel", "join"]


def test_a_following_rank_releases_its_graphs_when_told_to_stop(monkeypatch):
    calls: list[str] = []
    messages = iter([("execute", ([[5]], [3], [[[0]]]), {}), ("execute", ([[7]], [4], [[[0]]]), {}),
                     (workers.STOP, (), {})])
    monkeypatch.setattr(workers, "_broadcast", lambda message, parallel: next(messages))
    ran = workers.worker_loop(_Runner(calls), ParallelContext(rank=1, world_size=2))
    assert ran == 2
    assert calls == ["execute([[5]], [3], [[[0]]])", "execute([[7]], [4], [[[0]]])", "release_graphs"]
