"""What each rank of a spawned test job runs: for every case (a checkpoint, tensor or expert parallel), build its
share of the model, compute the logits of packed prompts (every rank), then greedy-generate through the Engine
on rank 0 while the others follow its steps (the serving path: DriverRunner + worker_loop). Rank 0 saves the
logits and tokens for the test to compare with one process. One process group serves every case of a job."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import torch

CPU_FLOAT32 = dict(device="cpu", dtype="float32", kv_cache_memory=64 << 20, max_num_seqs=8)


@functools.cache
def _tokenizer(model_dir: Path):
    from quickmoe.tokenizer import load_tokenizer

    return load_tokenizer(model_dir)


def case_outputs(runner, prompts: list[list[int]], max_tokens: int, *, engine_runner=None):
    """(logits [T, V] of the packed prompts, greedy tokens of each prompt) through `runner` (a single-process
    ModelRunner, or rank 0's DriverRunner as engine_runner)."""
    from quickmoe.engine.block_manager import KVBlockManager
    from quickmoe.engine.engine import Engine
    from quickmoe.engine.sampling_params import SamplingParams
    blocks = KVBlockManager.for_plan(runner.kv_cache.plan)
    for seq, p in enumerate(prompts):
        blocks.allocate(seq, 0, len(p))
    tables = blocks.step_block_tables(range(len(prompts)))
    logits = runner.forward(runner.build_batch(prompts, [0] * len(prompts), tables), all_logits=True)  # [T, V]
    if engine_runner is None and getattr(runner, "parallel", None) is not None and not runner.parallel.is_driver:
        return logits, None
    engine = Engine(engine_runner or runner, _tokenizer(runner.model_dir), max_num_seqs=8,
                    max_num_batched_tokens=256)
    params = SamplingParams(max_tokens=max_tokens, temperature=0, ignore_eos=True)
    for i, p in enumerate(prompts):
        engine.add_request(str(i), p, params)
    tokens: dict[str, list[int]] = {str(i): [] for i in range(len(prompts))}
    while engine.has_unfinished():
        for out in engine.step():
            tokens[out.request_id].extend(out.token_ids)
    return logits, [tokens[str(i)] for i in range(len(prompts))]


def run_rank(rank: int, world: int, init_method: str, cases: list[dict], out_dir: str) -> None:
    """Spawned: one rank of `world` over every case; rank 0 writes <out_dir>/<case>.pt."""
    from quickmoe.config import EngineConfig
    from quickmoe.distributed.env import Rendezvous, init_parallel
    from quickmoe.executor.model_runner import ModelRunner
    from quickmoe.executor.workers import DriverRunner, worker_loop

    torch.set_num_threads(1)
    if world == 4:  # the tiny tensors' runs are short: with 4 ranks, read every sliced tensor in runs anyway
        from quickmoe.checkpoint import narrow

        narrow.MIN_RUN_BYTES = 1
    parallel0 = init_parallel(Rendezvous(init_method, rank, world, rank), device=torch.device("cpu"),
                              expert_parallel=False)
    for case in cases:
        parallel = type(parallel0)(**{**parallel0.__dict__, "expert_parallel": case["expert_parallel"]})
        engine = EngineConfig(model=case["model"], **{**CPU_FLOAT32, **case.get("engine", {})})
        runner = ModelRunner(case["model"], engine, parallel=parallel)
        if rank == 0:
            driver = DriverRunner(runner, parallel)
            logits, tokens = case_outputs(runner, case["prompts"], case["max_tokens"], engine_runner=driver)
            driver.stop_workers()
            torch.save({"logits": logits, "tokens": tokens, "ranks": runner.report.info.get("ranks")},
                       Path(out_dir) / f"{case['name']}.pt")
        else:
            case_outputs(runner, case["prompts"], case["max_tokens"])
            worker_loop(runner, parallel)
    torch.distributed.destroy_process_group()
    os._exit(0)  # skip interpreter teardown (spawned test ranks: seconds on a loaded machine)
