"""The start and end of the process groups: NCCL on GPUs, gloo on CPU (and a gloo group for Python objects beside
NCCL), with the NCCL environment of rendezvous.py applied first."""

from __future__ import annotations

import datetime
import logging
import time

import torch
import torch.distributed as dist

from quickmoe.distributed.context import ParallelContext
from quickmoe.distributed.rendezvous import NCCL_ENV, Rendezvous, apply_nccl_env, free_port, torchrun_rendezvous

__all__ = ["NCCL_ENV", "Rendezvous", "apply_nccl_env", "close_parallel", "free_port", "init_parallel",
           "torchrun_rendezvous"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 600.0  # a collective that waits this long fails (a rank that hangs rather than dies)
GLOO_RELEASE_S = 0.1  # see close_parallel


def init_parallel(rendezvous: Rendezvous, *, device: torch.device, expert_parallel: bool,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> ParallelContext:
    """Join the process group (NCCL for CUDA devices, gloo on CPU) and make this rank's ParallelContext. On
    GPUs a second, gloo group carries the step inputs (Python objects), so they never go through the device."""
    apply_nccl_env()
    timeout = datetime.timedelta(seconds=timeout_s)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":  # this rank's GPU before NCCL sees the process (its communicator binds to it)
        torch.cuda.set_device(rendezvous.local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend, init_method=rendezvous.init_method, rank=rendezvous.rank,
                                world_size=rendezvous.world_size, timeout=timeout)
    group = dist.group.WORLD
    cpu_group = dist.new_group(backend="gloo", timeout=timeout) if backend != "gloo" else group
    logger.info("rank %d of %d joined (%s, %s)", rendezvous.rank, rendezvous.world_size, backend,
                rendezvous.init_method)
    return ParallelContext(rank=rendezvous.rank, world_size=rendezvous.world_size, expert_parallel=expert_parallel,
                           group=group, cpu_group=cpu_group, local_rank=rendezvous.local_rank)


def close_parallel() -> None:
    """Leave every process group of this rank, then let gloo's worker threads drop their last work. A gloo thread
    releases a finished collective's work, and with it the Python objects of its tensors (which takes the GIL), just
    after the caller's wait returned; when the interpreter is already finalizing then, the release aborts the process
    ("terminate called without an active exception": rank 0 under torchrun, about 1 CPU run in 6 of
    tests/distributed/test_processes.py; gdb: ProcessGroupGloo::runLoop -> ~AsyncBroadcastWork -> take_gil ->
    std::terminate). Sleeping releases the GIL, so they finish while Python is alive."""
    if dist.is_initialized():
        dist.destroy_process_group()
    time.sleep(GLOO_RELEASE_S)
