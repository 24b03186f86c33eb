"""Starting the ranks of a model spread over several processes, and noticing when one dies.

`start_ranks`: under torchrun (RANK / WORLD_SIZE in the environment, any number of nodes) this process joins
torchrun's rendezvous as the rank it was given; otherwise quickmoe spawns ranks 1..N-1 itself with
torch.multiprocessing (spawn: fresh interpreters, the NCCL environment of `distributed/env.py` inherited) and
becomes rank 0. Each spawned rank builds its ModelRunner and follows rank 0's steps (executor/workers.py).

A rank that dies is noticed, never waited on forever: rank 0 watches its spawned ranks' process sentinels on a
thread and, if one exits while the model is in use, logs one line naming the rank and its exit code, kills the
others and exits the process with status 1 (the engine may be blocked inside a collective that would otherwise
wait until its timeout). Each spawned rank watches its parent the same way. Under torchrun, torchrun's agent
does this (it stops every rank when one fails); collectives also time out (distributed/env.py)."""

from __future__ import annotations

import logging
import multiprocessing.connection
import os
import sys
import threading
import time
from dataclasses import dataclass, field

import torch
import torch.multiprocessing as mp

from quickmoe.config import EngineConfig
from quickmoe.distributed import ParallelContext
from quickmoe.distributed.env import Rendezvous, apply_nccl_env, free_port, init_parallel, torchrun_rendezvous
from quickmoe.errors import ConfigError
from quickmoe.executor.model_runner import resolve_device

__all__ = ["Ranks", "check_split", "start_ranks"]

logger = logging.getLogger(__name__)

EXIT_RANK_DIED = 1


@dataclass
class Ranks:
    """This process's ParallelContext and, on a rank 0 that spawned them, the other ranks' processes."""

    parallel: ParallelContext
    processes: list = field(default_factory=list)  # spawned ranks 1..N-1 (empty under torchrun)
    stopping: threading.Event = field(default_factory=threading.Event)

    def watch(self) -> None:
        """Start the thread that ends this process (status 1, one line) when a spawned rank dies."""
        if self.processes:
            threading.Thread(target=self._watch, name="quickmoe-rank-watch", daemon=True).start()

    def _watch(self) -> None:
        sentinels = {p.sentinel: (rank, p) for rank, p in enumerate(self.processes, start=1)}
        ready = multiprocessing.connection.wait(list(sentinels))
        if self.stopping.is_set():
            return
        rank, proc = sentinels[ready[0]]
        proc.join(timeout=1.0)
        message = (f"tensor-parallel rank {rank} (pid {proc.pid}) exited with code {proc.exitcode}; "
                   f"stopping all {self.parallel.world_size} ranks")
        logger.error(message)
        print(f"quickmoe: error: {message}", file=sys.stderr, flush=True)
        self.kill()
        os._exit(EXIT_RANK_DIED)

    def kill(self) -> None:
        for proc in self.processes:
            if proc.is_alive():
                proc.kill()

    def join(self, timeout_s: float = 30.0) -> None:
        """After the stop message: wait for the spawned ranks to exit, killing those that do not."""
        self.stopping.set()
        deadline = time.monotonic() + timeout_s
        for proc in self.processes:
            proc.join(timeout=max(deadline - time.monotonic(), 0.1))
        self.kill()


def _check_devices(engine: EngineConfig, world_size: int) -> torch.device:
    device = resolve_device(engine.device)
    if device.type == "cuda" and torch.cuda.device_count() < world_size:
        raise ConfigError(f"tensor_parallel_size = {world_size}: only {torch.cuda.device_count()} GPU(s) visible "
                          f"on this host (expected at most that many, or launch with torchrun across hosts)")
    return device


def check_split(model_dir: str, engine: EngineConfig) -> None:
    """Build every rank's share of the model on the meta device (no memory, no process started): a size the
    ranks cannot split (heads, KV heads, experts, an intermediate dimension in a format's blocks) fails now, as
    the ConfigError naming the field, its value and what was expected."""
    from quickmoe.config import ModelConfig
    from quickmoe.models.registry import build_model

    config = ModelConfig.from_dir(model_dir)
    for rank in range(engine.tensor_parallel_size):
        parallel = ParallelContext(rank=rank, world_size=engine.tensor_parallel_size,
                                   expert_parallel=engine.enable_expert_parallel)
        build_model(config, dtype=torch.bfloat16, device="meta", parallel=parallel)


def start_ranks(model_dir: str, engine: EngineConfig) -> Ranks:
    """Join torchrun's ranks, or spawn engine.tensor_parallel_size - 1 ranks and become rank 0 (see the module
    docstring). The spawned ranks start loading at once, beside this process."""
    world = engine.tensor_parallel_size
    check_split(model_dir, engine)
    apply_nccl_env()  # before anything starts: spawned ranks inherit it
    rendezvous = torchrun_rendezvous()
    if rendezvous is not None:
        if rendezvous.world_size != world:
            raise ConfigError(f"tensor_parallel_size = {world}: torchrun started WORLD_SIZE={rendezvous.world_size} "
                              "processes (expected the same number)")
        device = resolve_device(engine.device)
        if device.type == "cuda" and rendezvous.local_rank >= torch.cuda.device_count():
            raise ConfigError(f"LOCAL_RANK = {rendezvous.local_rank}: only {torch.cuda.device_count()} GPU(s) "
                              "visible on this host")
        return Ranks(init_parallel(rendezvous, device=device, expert_parallel=engine.enable_expert_parallel))
    device = _check_devices(engine, world)
    init_method = f"tcp://127.0.0.1:{free_port()}"
    ctx = mp.get_context("spawn")
    processes = [ctx.Process(target=_spawned_rank, name=f"quickmoe-rank{rank}", daemon=True,
                             args=(Rendezvous(init_method, rank, world, rank), model_dir, engine, os.getpid()))
                 for rank in range(1, world)]
    for proc in processes:
        proc.start()
    ranks = Ranks(ParallelContext(), processes)
    ranks.watch()  # a rank that fails while loading ends this process too, with its exit code
    ranks.parallel = init_parallel(Rendezvous(init_method, 0, world, 0), device=device,
                                   expert_parallel=engine.enable_expert_parallel)
    return ranks


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    logger.error("rank 0 (pid %d) is gone; this rank exits", parent_pid)
    os._exit(EXIT_RANK_DIED)


def _spawned_rank(rendezvous: Rendezvous, model_dir: str, engine: EngineConfig, parent_pid: int) -> None:
    """A spawned rank: join, build and load its share, then follow rank 0's steps until told to stop."""
    from quickmoe.executor.model_runner import ModelRunner
    from quickmoe.executor.workers import worker_loop

    logging.basicConfig(level=os.environ.get("QUICKMOE_LOG_LEVEL", "WARNING"),
                        format=f"%(asctime)s rank{rendezvous.rank} %(levelname)s %(name)s: %(message)s")
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="quickmoe-parent-watch", daemon=True).start()
    parallel = init_parallel(rendezvous, device=resolve_device(engine.device),
                             expert_parallel=engine.enable_expert_parallel)
    runner = ModelRunner(model_dir, engine, parallel=parallel)
    worker_loop(runner, parallel)
    torch.distributed.destroy_process_group()
