"""Spawned gloo jobs for the tensor / expert parallel tests: one job per world size runs every case on the same
process group (spawning is the slow part on a CPU), and the tests compare its outputs with one process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from quickmoe.distributed.env import free_port

JOB_TIMEOUT_S = 240


def run_job(world: int, cases: list[dict], out_dir: Path, env: dict | None = None) -> dict[str, dict]:
    """Spawn `world` ranks of tests/distributed/rank_job.py over `cases` (with `env` added to their environment);
    {case name: rank 0's outputs}. A rank that fails or a job that outlives JOB_TIMEOUT_S fails the test (the other
    ranks are killed)."""
    import torch.multiprocessing as mp

    from .rank_job import run_rank

    ctx = mp.get_context("spawn")
    init = f"tcp://127.0.0.1:{free_port()}"
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    procs = [ctx.Process(target=run_rank, args=(rank, world, init, cases, str(out_dir)), daemon=True)
             for rank in range(world)]
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        for p in procs:
            p.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
    try:
        for p in procs:
            p.join(JOB_TIMEOUT_S)
        codes = [p.exitcode for p in procs]
        assert codes == [0] * world, f"ranks' exit codes {codes} (None: still running after {JOB_TIMEOUT_S} s)"
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
    return {c["name"]: torch.load(out_dir / f"{c['name']}.pt") for c in cases}


@pytest.fixture(scope="session")
def dist_ckpts(tmp_path_factory):
    """The tiny checkpoints of the tests: name -> directory (written once per session)."""
    from tests.models.conftest import write_small_checkpoint

    from .cases import CHECKPOINTS, QUANTIZED, TRITON

    root = tmp_path_factory.mktemp("dist")
    return {name: write_small_checkpoint(root / name, **kw)
            for name, kw in {**CHECKPOINTS, **QUANTIZED, **TRITON}.items()}
