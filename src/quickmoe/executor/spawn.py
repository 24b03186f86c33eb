"""Spawning ranks 1..N-1 of a model spread over several processes, and noticing when one dies; standard library
only at import, so the command line starts them before it imports torch (their imports and loads then run beside
rank 0's, not after).

Each spawned rank is a fresh interpreter (multiprocessing's spawn) that inherits the NCCL environment
(distributed/rendezvous.py), joins the rendezvous, builds and loads its share and follows rank 0's steps
(executor/workers.py) until told to stop. Rank 0 watches their process sentinels on a thread: a rank that exits
while the model is in use ends rank 0's process with status 1 and one line naming the rank and its exit code,
after killing the others (rank 0's engine may be blocked inside a collective that would otherwise wait until its
timeout). Each spawned rank watches its parent the same way."""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field

from quickmoe.distributed.rendezvous import Rendezvous, apply_nccl_env, free_port
from quickmoe.engine_config import EngineConfig

__all__ = ["EXIT_RANK_DIED", "SpawnedRanks", "ignore_stop_signals", "spawn_ranks"]

logger = logging.getLogger(__name__)

EXIT_RANK_DIED = 1


@dataclass
class SpawnedRanks:
    """Ranks 1..world_size-1, started by this process (rank 0), meeting it at `init_method`."""

    init_method: str
    world_size: int
    processes: list = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def watch(self) -> None:
        """Start the thread that ends this process (status 1, one line) when a spawned rank dies."""
        threading.Thread(target=self._watch, name="quickmoe-rank-watch", daemon=True).start()

    def _watch(self) -> None:
        sentinels = {p.sentinel: (rank, p) for rank, p in enumerate(self.processes, start=1)}
        ready = multiprocessing.connection.wait(list(sentinels))
        if self.stopping.is_set():
            return
        rank, proc = sentinels[ready[0]]
        proc.join(timeout=1.0)
        message = (f"tensor-parallel rank {rank} (pid {proc.pid}) exited with code {proc.exitcode}; "
                   f"stopping all {self.world_size} ranks")
        # the process's last words, whatever the logging level (-q): one line, as the command line's errors
        print(f"quickmoe: error: {message}", file=sys.stderr, flush=True)
        self.kill()
        os._exit(EXIT_RANK_DIED)

    def kill(self) -> None:
        for proc in self.processes:
            if proc.is_alive():
                proc.kill()

    def abandon(self) -> None:
        """Rank 0 failed on its own (its error is the one to report): stop watching and kill the others."""
        self.stopping.set()
        self.kill()

    def join(self, timeout_s: float = 30.0) -> None:
        """After the stop message: wait for the spawned ranks to exit, killing those that do not."""
        self.stopping.set()
        deadline = time.monotonic() + timeout_s
        for proc in self.processes:
            proc.join(timeout=max(deadline - time.monotonic(), 0.1))
        self.kill()


def spawn_ranks(model_dir: str, engine: EngineConfig) -> SpawnedRanks:
    """Start ranks 1..engine.tensor_parallel_size-1 on this host and watch them (see the module docstring)."""
    apply_nccl_env()  # inherited by the spawned ranks
    world = engine.tensor_parallel_size
    ranks = SpawnedRanks(f"tcp://127.0.0.1:{free_port()}", world)
    ctx = multiprocessing.get_context("spawn")
    for rank in range(1, world):
        proc = ctx.Process(target=_spawned_rank, name=f"quickmoe-rank{rank}", daemon=True,
                           args=(Rendezvous(ranks.init_method, rank, world, rank), model_dir, engine, os.getpid()))
        proc.start()
        ranks.processes.append(proc)
    ranks.watch()
    return ranks


def ignore_stop_signals() -> None:
    """A rank > 0 leaves when rank 0 tells it (or rank 0 is gone), not on the Ctrl-C or SIGTERM its terminal or
    launcher sends the whole group: rank 0 drains its requests first, and needs the others' steps meanwhile."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    logger.error("rank 0 (pid %d) is gone; this rank exits", parent_pid)
    os._exit(EXIT_RANK_DIED)


def _spawned_rank(rendezvous: Rendezvous, model_dir: str, engine: EngineConfig, parent_pid: int) -> None:
    """A spawned rank: join, build and load its share, then follow rank 0's steps until told to stop."""
    logging.basicConfig(level=os.environ.get("QUICKMOE_LOG_LEVEL", "WARNING"),
                        format=f"%(asctime)s rank{rendezvous.rank} %(levelname)s %(name)s: %(message)s")
    ignore_stop_signals()
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="quickmoe-parent-watch", daemon=True).start()
    from quickmoe.distributed.env import close_parallel, init_parallel
    from quickmoe.executor.model_runner import ModelRunner, resolve_device
    from quickmoe.executor.workers import worker_loop

    parallel = init_parallel(rendezvous, device=resolve_device(engine.device),
                             expert_parallel=engine.enable_expert_parallel)
    runner = ModelRunner(model_dir, engine, parallel=parallel)
    worker_loop(runner, parallel)
    close_parallel()
