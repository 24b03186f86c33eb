"""Where the ranks meet and the environment they start with; standard library only, so the command line can
start the other ranks before it imports torch.

NVLink multicast (NVLS) stays off on the machines quickmoe is measured on: `NCCL_ENV` is set in the parent before
any rank is spawned (spawned ranks inherit it) and again in each process before `init_process_group`, unless the
user set a value. Under `torchrun` (RANK / WORLD_SIZE / MASTER_ADDR set by it) the ranks are torchrun's;
otherwise quickmoe spawns its own and they meet over a local TCP port."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from quickmoe.errors import ConfigError

__all__ = ["NCCL_ENV", "Rendezvous", "apply_nccl_env", "free_port", "torchrun_rendezvous"]

# NVLink SHARP / multicast off (NVLS), and NCCL's cuMem-based buffers with it (they back multicast objects).
NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "NCCL_CUMEM_ENABLE": "0", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}


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
