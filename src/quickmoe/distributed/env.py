"""The environment of every process quickmoe starts for a model spread over ranks, and the start of its
process groups.

NVLink multicast (NVLS) stays off on the machines quickmoe is measured on: `NCCL_ENV` is set in the parent
before any worker is spawned (spawned children inherit it) and again in each process before
`init_process_group`, unless the user set a value. Under `torchrun` (RANK / WORLD_SIZE / MASTER_ADDR set by
it) the ranks are torchrun's; otherwise quickmoe spawns its own and rendezvous over a local TCP port."""

from __future__ import annotations

import datetime
import logging
import os
import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist

from quickmoe.distributed.context import ParallelContext
from quickmoe.errors import ConfigError

__all__ = ["NCCL_ENV", "Rendezvous", "apply_nccl_env", "free_port", "init_parallel", "torchrun_rendezvous"]

logger = logging.getLogger(__name__)

# NVLink SHARP / multicast off (NVLS), and NCCL's cuMem-based buffers with it (they back multicast objects).
NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "NCCL_CUMEM_ENABLE": "0", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}

DEFAULT_TIMEOUT_S = 600.0  # a collective that waits this long fails (a rank that hangs rather than dies)


def apply_nccl_env(environ: dict | None = None) -> dict:
    """Set NCCL_ENV's values in `environ` (os.environ by default) where the user set none; returns it."""
    environ = os.environ if environ is None else environ
    for key, value in NCCL_ENV.items():
        environ.setdefault(key, value)
    return environ


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` now (the spawned ranks' rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Rendezvous:
    """Where the ranks meet: `init_method` (tcp://host:port or env://), this process's `rank`, `world_size`,
    and `local_rank` (its GPU on its host)."""

    init_method: str
    rank: int
    world_size: int
    local_rank: int


def torchrun_rendezvous() -> Rendezvous | None:
    """The rendezvous torchrun set up (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT), or None outside it."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local = int(os.environ.get("LOCAL_RANK", rank))
    except ValueError as exc:
        raise ConfigError(f"torchrun environment: {exc} (expected integer RANK, WORLD_SIZE, LOCAL_RANK)") from None
    return Rendezvous("env://", rank, world, local)


def init_parallel(rendezvous: Rendezvous, *, device: torch.device, expert_parallel: bool,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> ParallelContext:
    """Join the process group (NCCL for CUDA devices, gloo on CPU) and make this rank's ParallelContext. On
    GPUs a second, gloo group carries the step inputs (Python objects), so they never go through the device."""
    apply_nccl_env()
    timeout = datetime.timedelta(seconds=timeout_s)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, init_method=rendezvous.init_method, rank=rendezvous.rank,
                                world_size=rendezvous.world_size, timeout=timeout)
    group = dist.group.WORLD
    cpu_group = dist.new_group(backend="gloo", timeout=timeout) if backend != "gloo" else group
    logger.info("rank %d of %d joined (%s, %s)", rendezvous.rank, rendezvous.world_size, backend,
                rendezvous.init_method)
    return ParallelContext(rank=rendezvous.rank, world_size=rendezvous.world_size, expert_parallel=expert_parallel,
                           group=group, cpu_group=cpu_group, local_rank=rendezvous.local_rank)
