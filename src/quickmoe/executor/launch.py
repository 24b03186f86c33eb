"""Joining the ranks of a model spread over several processes (rank 0's side; executor/spawn.py starts the others).

`start_ranks`: under torchrun (RANK / WORLD_SIZE in the environment, any number of nodes) this process joins
torchrun's rendezvous as the rank it was given (torchrun's agent stops every rank when one fails; collectives also
time out, distributed/env.py); otherwise ranks 1..N-1 are spawned (unless the command line already did, before
its imports: `spawned`) and this process becomes rank 0. Before any rank joins, every rank's share of the model
is built on the meta device, so a size the ranks cannot split fails first, as one ConfigError."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from quickmoe.config import EngineConfig
from quickmoe.distributed import ParallelContext
from quickmoe.distributed.env import Rendezvous, init_parallel, torchrun_rendezvous
from quickmoe.errors import ConfigError
from quickmoe.executor.model_runner import resolve_device
from quickmoe.executor.spawn import SpawnedRanks, spawn_ranks

__all__ = ["Ranks", "check_split", "start_ranks"]


@dataclass
class Ranks:
    """This process's ParallelContext and, on a rank 0 that spawned them, the other ranks."""

    parallel: ParallelContext
    spawned: SpawnedRanks | None = None


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


def _check_devices(engine: EngineConfig, world_size: int) -> torch.device:
    device = resolve_device(engine.device)
    if device.type == "cuda" and torch.cuda.device_count() < world_size:
        raise ConfigError(f"tensor_parallel_size = {world_size}: only {torch.cuda.device_count()} GPU(s) visible "
                          f"on this host (expected at most that many, or launch with torchrun across hosts)")
    return device


def start_ranks(model_dir: str, engine: EngineConfig, spawned: SpawnedRanks | None = None) -> Ranks:
    """Join torchrun's ranks, or become rank 0 of ranks spawned here (now, or before the imports: `spawned`)."""
    world = engine.tensor_parallel_size
    try:
        check_split(model_dir, engine)
        rendezvous = torchrun_rendezvous()
        if rendezvous is not None:
            if rendezvous.world_size != world:
                raise ConfigError(f"tensor_parallel_size = {world}: torchrun started WORLD_SIZE="
                                  f"{rendezvous.world_size} processes (expected the same number)")
            device = resolve_device(engine.device)
            if device.type == "cuda" and rendezvous.local_rank >= torch.cuda.device_count():
                raise ConfigError(f"LOCAL_RANK = {rendezvous.local_rank}: only {torch.cuda.device_count()} GPU(s) "
                                  "visible on this host")
            return Ranks(init_parallel(rendezvous, device=device, expert_parallel=engine.enable_expert_parallel))
        device = _check_devices(engine, world)
    except BaseException:
        if spawned is not None:  # this rank's error, not the others' exit, is the one reported
            spawned.abandon()
        raise
    if spawned is None:
        spawned = spawn_ranks(model_dir, engine)
    parallel = init_parallel(Rendezvous(spawned.init_method, 0, world, 0), device=device,
                             expert_parallel=engine.enable_expert_parallel)
    return Ranks(parallel, spawned)
