"""Idle-time warming of the MoE kernels of prefill batch sizes (executor/kernel_warmup.py): the ladder of batch
sizes; nothing to warm on the CPU; on the GPU, after the engine's idle work no prefill size up to
max_num_batched_tokens compiles a MoE GEMM variant, and a cold engine does compile one (the test can fail)."""

from __future__ import annotations

import random

import pytest
import torch

from quickmoe.executor.kernel_warmup import warmup_token_counts


def test_the_ladder_is_powers_of_two_and_their_successors_then_the_budget():
    assert warmup_token_counts(8192) == sorted({1 << i for i in range(14)} | {(1 << i) + 1 for i in range(13)})
    assert warmup_token_counts(1000) == [1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65, 128, 129, 256, 257, 512, 513,
                                         1000]
    assert warmup_token_counts(1) == [1]


def _shipped_shapes() -> list[tuple[int, int, int, str]]:
    """(experts, N, K, weights) of every gate_up table shipped in kernels/configs/ (GEMM 1's entry sets the
    alignment's tile)."""
    from quickmoe.kernels.moe_configs import CONFIG_DIR

    shapes = []
    for path in sorted(CONFIG_DIR.glob("E*_N*_K*_*_gate_up_*.json")):
        e, n, k, weights = path.name.split("_")[:4]
        shapes.append((int(e[1:]), int(n[1:]), int(k[1:]), weights))
    assert shapes, f"no gate_up tables in {CONFIG_DIR}"
    return sorted(set(shapes))


@pytest.mark.parametrize("device_name, arch", [("NVIDIA H100 80GB HBM3", "sm_90"), ("NVIDIA H200", "sm_90"),
                                               ("a GPU without tuned tables", "sm_100")])
@pytest.mark.parametrize("shape", _shipped_shapes(), ids=lambda s: "E{}_N{}_K{}_{}".format(*s))
@pytest.mark.parametrize("top_k", [2, 4, 8])
def test_the_ladder_runs_every_alignment_variant_a_step_can_pick(device_name, arch, shape, top_k):
    """The single-program alignment compiles one variant per (block_m of the tuned entry nearest T, sort chunk of
    T x top_k), the chunked one (T x top_k > SINGLE_PROGRAM_MAX) one per block_m: every T a step can have picks a
    variant some T of the ladder picked (one left out would compile in the middle of serving: 0.75 s of a timed
    bench generate on the H100)."""
    from quickmoe.kernels.moe_align import SINGLE_PROGRAM_MAX, align_chunk
    from quickmoe.kernels.moe_configs import moe_kernel_config

    experts, n, k, weights = shape

    def variant(tokens: int) -> tuple[int, int]:
        config = moe_kernel_config(experts, n, k, weights, device_name, tokens, arch=arch, proj="gate_up")
        chunked = tokens * top_k > SINGLE_PROGRAM_MAX
        return config.block_m, 0 if chunked else align_chunk(tokens * top_k)

    budget = 8192
    warmed = {variant(t) for t in warmup_token_counts(budget)}
    needed = {variant(t) for t in range(1, budget + 1)}
    assert needed <= warmed, f"variants no ladder step runs: {sorted(needed - warmed)}"


def test_a_cpu_engine_has_nothing_to_warm(ckpt_factory):
    from quickmoe.llm import LLM

    llm = LLM(ckpt_factory(layers=2, seed=5), device="cpu", max_model_len=64)
    assert llm.runner.moe_warmup.pending == [] and not llm.runner.warm_next_moe_kernels()


def _gemm_variants() -> int:
    """Compiled variants of the two MoE GEMM kernels and the alignment in this process."""
    from quickmoe.kernels import moe_align, moe_gemm

    kernels = (moe_gemm._gemm1_swiglu_kernel, moe_gemm._gemm2_kernel, moe_align._align_kernel,
               moe_align._align_count_kernel, moe_align._align_plan_kernel, moe_align._align_scatter_kernel)
    return sum(len(kernel.device_caches[device][0]) for kernel in kernels for device in list(kernel.device_caches))


@pytest.mark.gpu
def test_after_the_idle_work_no_prefill_size_compiles_a_moe_kernel(ckpt_factory):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM

    # a model shape no other test uses (its own kernel variants: earlier tests in the process compiled theirs)
    # a fixed KV cache: by default it would take 90% of the GPU from the tests beside it (pytest-xdist)
    llm = LLM(ckpt_factory(layers=2, seed=6, intermediate_size=160), device="cuda", max_model_len=2048,
              max_num_batched_tokens=2048, cuda_graphs="off", kv_cache_memory=1 << 30)
    rng = random.Random(1)
    vocab = llm.config.vocab_size - 2
    params = SamplingParams(max_tokens=2, temperature=0, ignore_eos=True)
    before = _gemm_variants()
    llm.generate([[rng.randrange(vocab) for _ in range(1500)]], params)  # cold: a prefill size never seen
    assert _gemm_variants() > before, "the check cannot fail: a new prefill size compiled nothing"
    pieces = 0
    while llm.engine.idle_work():
        pieces += 1
    assert pieces >= 2 and llm.runner.moe_warmup.pending == []  # the ladder's sizes in groups, side by side
    warm = _gemm_variants()
    for length in (3, 33, 40, 130, 700, 2000):
        llm.generate([[rng.randrange(vocab) for _ in range(length)]], params)
    assert _gemm_variants() == warm
