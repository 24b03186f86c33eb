"""Tensor and expert parallel on CPU (gloo, 2 and 4 spawned ranks): float32 logits of packed prompts equal one
process's within 1e-5, and greedy tokens through the engine (rank 0 scheduling and sampling, the others following
its steps) are identical, for tiny gpt-oss (MXFP4), Qwen3-MoE and Mixtral checkpoints; with 2 ranks also FP8
(experts and dense layers), NVFP4 experts, and the MoE Triton kernels (interpreted) on 96 MXFP4 channels split
64 + 32 and on 2 experts a rank."""

from __future__ import annotations

import pytest

from .cases import CHECKPOINTS, MAX_TOKENS, QUANTIZED, TRITON, cases, prompts
from .conftest import run_job
from .rank_job import CPU_FLOAT32, case_outputs

# float32: the ranks' partial sums are added in another order than one process's dot products, so logits differ by
# rounding; 1e-5 at the logits' scale (max |logit| of the case, at least 1)
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def single(dist_ckpts):
    """One process's logits and greedy tokens of every checkpoint."""
    from quickmoe.config import EngineConfig
    from quickmoe.executor.model_runner import ModelRunner

    out = {}
    for name, path in dist_ckpts.items():
        runner = ModelRunner(path, EngineConfig(model=str(path), **CPU_FLOAT32))
        out[name] = case_outputs(runner, prompts(), MAX_TOKENS)
    return out


def _compare(results: dict, single: dict, world: int) -> None:
    for case, got in results.items():
        name = case.rsplit("-", 1)[0]
        want_logits, want_tokens = single[name]
        diff = (got["logits"] - want_logits).abs().max().item()
        scale = max(1.0, want_logits.abs().max().item())
        assert want_logits.std() > 1e-2
        assert diff <= TOLERANCE * scale, f"{case}, {world} ranks: max abs logit diff {diff:.3g} (scale {scale:.3g})"
        assert got["tokens"] == want_tokens, f"{case}, {world} ranks: greedy tokens differ"
        slowest = got["ranks"]["slowest"]
        assert len(got["ranks"]["per_rank"]) == world and "load" in slowest and 0 <= slowest["load"]["rank"] < world


@pytest.mark.parametrize("world", [2, 4])
def test_tensor_and_expert_parallel_match_one_process(world, dist_ckpts, single, tmp_path):
    names = sorted(CHECKPOINTS) + (sorted(QUANTIZED) if world == 2 else [])
    job = cases(dist_ckpts, names, expert_parallel=False) + cases(dist_ckpts, names, expert_parallel=True)
    env = None
    if world == 2:  # and the MoE Triton kernels (interpreted) on an uneven MXFP4 split, against one process's torch
        job += cases(dist_ckpts, sorted(TRITON), expert_parallel=False, moe_kernels="triton")
        # expert parallel through the kernels: other ranks' assignments aligned past the used tiles, rows zeroed
        job += cases(dist_ckpts, sorted(TRITON), expert_parallel=True, moe_kernels="triton")
        env = {"TRITON_INTERPRET": "1"}
    _compare(run_job(world, job, tmp_path, env), single, world)
