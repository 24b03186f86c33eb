"""Rank 0 drives, the other ranks follow: each call of rank 0's runner that runs the model (a step, a deferred
CUDA-graph capture) is first broadcast to the other ranks (torch.distributed's broadcast_object_list over the
CPU group: the step's token ids, positions, block tables, which rows are sampled), which run the same call on
their share of the model. Rank 0 alone schedules, samples and detokenizes; its sampled tokens reach the others
inside the step (ModelRunner.execute). No RPC layer of quickmoe's own: one collective per step."""

from __future__ import annotations

import logging
from typing import Any

import torch.distributed as dist

from quickmoe.distributed import ParallelContext

__all__ = ["STOP", "DriverRunner", "worker_loop"]

logger = logging.getLogger(__name__)

STOP = "stop"
# what the other ranks need of an `execute` call (the sampling parameters, generators and masks stay on rank 0)
_WORKER_KWARGS = ("prev_rows", "sample_rows", "prompt_logprobs")


def _broadcast(message: Any, parallel: ParallelContext) -> Any:
    box = [message]
    dist.broadcast_object_list(box, src=0, group=parallel.cpu_group)
    return box[0]


class DriverRunner:
    """Rank 0's view of a ModelRunner (what the Engine drives): the same attributes, and the calls that run the
    model are mirrored on the other ranks first."""

    def __init__(self, runner, parallel: ParallelContext) -> None:
        assert parallel.is_driver and parallel.sharded
        self._runner = runner
        self._parallel = parallel
        self._stopped = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)

    def execute(self, token_ids: list[list[int]], start_positions: list[int], block_tables: list, **kwargs: Any):
        shared = {k: v for k, v in kwargs.items() if k in _WORKER_KWARGS}
        _broadcast(("execute", (token_ids, start_positions, block_tables), shared), self._parallel)
        return self._runner.execute(token_ids, start_positions, block_tables, **kwargs)

    def capture_deferred_graph(self) -> bool:
        if self._runner.graphs is None or not self._runner.graphs.info["deferred"]:
            return False  # nothing to capture: no message
        _broadcast(("capture_deferred_graph", (), {}), self._parallel)
        return self._runner.capture_deferred_graph()

    def warm_next_moe_kernels(self) -> bool:
        if not self._runner.moe_warmup.pending:
            return False  # nothing to warm: no message
        _broadcast(("warm_next_moe_kernels", (), {}), self._parallel)
        return self._runner.warm_next_moe_kernels()

    def stop_workers(self) -> None:
        """Tell the other ranks to leave their loop (once)."""
        if not self._stopped:
            self._stopped = True
            _broadcast((STOP, (), {}), self._parallel)


def worker_loop(runner, parallel: ParallelContext) -> int:
    """Run rank 0's calls on this rank's runner until it says stop, then release the runner's CUDA graphs (the
    caller leaves the process groups next); returns the number of calls run."""
    assert not parallel.is_driver
    calls = 0
    while True:
        op, args, kwargs = _broadcast(None, parallel)
        if op == STOP:
            logger.info("rank %d: stop after %d calls", parallel.rank, calls)
            runner.release_graphs()  # before this rank leaves the process groups (NCCL waits for them)
            return calls
        getattr(runner, op)(*args, **kwargs)
        calls += 1
