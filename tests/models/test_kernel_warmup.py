"""Idle-time warming of the MoE kernels of prefill batch sizes (executor/kernel_warmup.py): the ladder of batch
sizes; nothing to warm on the CPU; on the GPU, after the engine's idle work no prefill size up to
max_num_batched_tokens compiles a MoE GEMM variant, and a cold engine does compile one (the test can fail)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import tempfile
import types
from pathlib import Path

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
def test_the_ladder_runs_every_variant_a_step_can_pick(device_name, arch, shape, top_k):
    """A step's MoE compiles one variant per (GEMM 1's entry, GEMM 2's entry: those of the tuned key nearest T;
    the single-program alignment's sort chunk of T x top_k, or the chunked alignment where T x top_k >
    SINGLE_PROGRAM_MAX): every T a step can have picks a variant some T of the ladder picked (one left out would
    compile in the middle of serving: 0.75 s of a timed bench generate on the H100). The ladder takes the keys'
    starts from `moe_layer_key_starts` of a layer of this shape; the files' keys are read here too."""
    from quickmoe.executor.kernel_warmup import moe_layer_key_starts
    from quickmoe.kernels.moe_align import SINGLE_PROGRAM_MAX, align_chunk
    from quickmoe.kernels.moe_configs import CONFIG_DIR, moe_kernel_config

    experts, n, k, weights = shape
    inter = n // 2

    def variant(tokens: int) -> tuple:
        config1 = moe_kernel_config(experts, n, k, weights, device_name, tokens, arch=arch, proj="gate_up")
        config2 = moe_kernel_config(experts, k, inter, weights, device_name, tokens, arch=arch, proj="down")
        chunked = tokens * top_k > SINGLE_PROGRAM_MAX
        return config1, config2, 0 if chunked else align_chunk(tokens * top_k)

    layer = types.SimpleNamespace(num_experts=experts, hidden_size=k, intermediate_size=inter,
                                  quant_method=types.SimpleNamespace(kernel_weights=weights))
    starts = moe_layer_key_starts(layer, device_name, arch)
    if arch == "sm_90":  # each file's own keys, read as JSON (a rank's gate_up at TP = 2 has no down file of its shape)
        own = [CONFIG_DIR / f"E{experts}_N{n}_K{k}_{weights}_gate_up_{device_name.replace(' ', '_')}.json",
               CONFIG_DIR / f"E{experts}_N{k}_K{inter}_{weights}_down_{device_name.replace(' ', '_')}.json"]
        for path in own:
            if path.is_file():
                keys = sorted(int(t) for t in json.loads(path.read_text()))
                assert {1} | {(a + b) // 2 + 1 for a, b in zip(keys, keys[1:])} <= starts, path.name
    budget = 8192
    warmed = {variant(t) for t in warmup_token_counts(budget, starts)}
    needed = {variant(t) for t in range(1, budget + 1)}
    missing = {t: variant(t) for t in range(1, budget + 1) if variant(t) not in warmed}
    assert needed <= warmed, f"{len(missing)} counts read variants no ladder step runs, first {sorted(missing)[:8]}"


def test_each_key_is_read_from_its_start_on():
    """`nearest_key_starts` against `moe_kernel_config`'s own choice at every T of a table with odd gaps."""
    from quickmoe.kernels.moe_configs import MoEKernelConfig, config_file_name, moe_kernel_config, nearest_key_starts

    keys = [1, 2, 8, 12, 48, 64, 65, 96, 128, 1024, 1025, 4096]
    assert nearest_key_starts([]) == []
    starts = nearest_key_starts(keys)
    assert starts[:4] == [1, 2, 6, 11]
    configs = [MoEKernelConfig(block_n=bn, num_stages=st) for bn, st in itertools.product((16, 32, 64, 128), (2, 3, 4))]
    with tempfile.TemporaryDirectory() as tmp:
        table = {str(key): dataclasses.asdict(config) for key, config in zip(keys, configs)}
        (Path(tmp) / config_file_name(8, 64, 32, "dense", "cpu", "gate_up")).write_text(json.dumps(table))
        read = [configs.index(moe_kernel_config(8, 64, 32, "dense", "cpu", t, Path(tmp), proj="gate_up"))
                for t in range(1, 5000)]
    # the key each T reads changes exactly at the starts, in order
    assert [t for t in range(2, 5000) if read[t - 1] != read[t - 2]] == starts[1:]
    assert read[0] == 0 and sorted(set(read)) == list(range(len(keys)))


def test_the_ladder_takes_each_tables_key_starts():
    """The starts come per table: two tables' keys pooled would give other starts (GEMM 1 keys 64, 128 and GEMM 2
    keys 96: T = 97 reads GEMM 1's key 128, which starts at 97, while the pooled keys 64, 96, 128 start at 81, 113)."""
    from quickmoe.executor.kernel_warmup import moe_layer_key_starts

    assert warmup_token_counts(1000, [1, 81, 113]) == sorted(set(warmup_token_counts(1000)) | {81, 113})
    assert warmup_token_counts(100, [81, 2097, 0]) == sorted(set(warmup_token_counts(100)) | {81})
    from quickmoe.kernels.moe_configs import MoEKernelConfig, config_file_name

    with tempfile.TemporaryDirectory() as tmp:
        for (n, k, proj), keys in (((64, 32, "gate_up"), [64, 128]), ((32, 32, "down"), [96])):
            table = {str(key): dataclasses.asdict(MoEKernelConfig()) for key in keys}
            (Path(tmp) / config_file_name(8, n, k, "fp8", "test GPU", proj)).write_text(json.dumps(table))
        layer = types.SimpleNamespace(num_experts=8, hidden_size=32, intermediate_size=32,
                                      quant_method=types.SimpleNamespace(kernel_weights="fp8"))
        assert moe_layer_key_starts(layer, "test GPU", None, Path(tmp)) == {1, 97}


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


@pytest.mark.gpu
def test_a_tuned_key_no_power_of_two_reads_is_warmed(ckpt_factory, monkeypatch, tmp_path):
    """A tuned table whose key 96 (between 64 and 128) has its own tile: T = 81-112 read it, and neither a power of
    two nor its successor does (before 7277633 the ladder left it out: a prefill of 100 tokens compiled its
    kernels while serving). After the idle work, steps of 81-112 tokens compile nothing."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.kernels import moe_configs
    from quickmoe.llm import LLM

    fallback = moe_configs._fallback
    table = {1: fallback(1), 64: fallback(64), 96: dataclasses.replace(fallback(65), num_stages=2),
             128: fallback(65), 1024: fallback(1024), 2048: fallback(2048)}
    path = tmp_path / "E4_table.json"
    path.write_text(json.dumps({str(t): dataclasses.asdict(c) for t, c in table.items()}))
    # both GEMMs of every 4-expert shape read this table (only this test's engine runs while it is in place)
    original = moe_configs._config_file
    monkeypatch.setattr(moe_configs, "_config_file",
                        lambda e, *args: path if e == 4 else original(e, *args))
    moe_configs.moe_kernel_config.cache_clear()
    try:
        llm = LLM(ckpt_factory(layers=2, seed=8, intermediate_size=224), device="cuda", max_model_len=2048,
                  max_num_batched_tokens=2048, cuda_graphs="off", kv_cache_memory=1 << 30)
        assert 81 in llm.runner.moe_warmup.pending
        while llm.engine.idle_work():
            pass
        rng = random.Random(2)
        vocab = llm.config.vocab_size - 2
        params = SamplingParams(max_tokens=2, temperature=0, ignore_eos=True)
        warm = _gemm_variants()
        for length in (81, 100, 112):
            llm.generate([[rng.randrange(vocab) for _ in range(length)]], params)
            assert _gemm_variants() == warm, f"a step of {length} tokens compiled a MoE kernel after the idle work"
    finally:
        moe_configs.moe_kernel_config.cache_clear()
