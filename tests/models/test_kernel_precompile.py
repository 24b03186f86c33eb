"""The start-up's precompile (executor/kernel_precompile.py) on the GPU, in fresh processes with empty kernel
caches: with it, nothing after the KV cache's allocation compiles a kernel in the process (the capture, the idle
work, prompts of new lengths and decode steps all load what the workers compiled) and the tokens are those of a
start without it; without it the same run compiles kernels in the process (the check can fail). The manifest's
decisions and the CPU's precompile (off) are tested on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

_RUN = textwrap.dedent("""
    import json, random, sys
    import triton
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.executor.model_runner import ModelRunner
    from quickmoe.llm import LLM

    events, phase = [], ["start"]
    def listener(*, src, metadata, metadata_group, times, cache_hit):
        events.append((phase[0], getattr(src, "name", "?"), cache_hit))
    triton.knobs.compilation.listener = listener
    init_kv = ModelRunner._init_kv_cache
    def marked(self, engine):
        init_kv(self, engine)
        phase[0] = "after_kv_cache"
    ModelRunner._init_kv_cache = marked

    model, mode = sys.argv[1], sys.argv[2]
    # a KV cache of its own size: sized from the free memory, it found none when the pytest process had run the
    # CUDA-graph tests before (their engines' memory held in its caching allocator)
    llm = LLM(model, device="cuda", max_model_len=4096, max_num_batched_tokens=2048, max_num_seqs=16,
              cuda_graphs_startup_max=2, kernel_precompile=mode, kv_cache_memory=512 << 20)
    llm.engine.finish_idle_work()
    rng = random.Random(3)
    vocab = llm.config.vocab_size - 2
    params = SamplingParams(max_tokens=5, temperature=0, ignore_eos=True)
    outs = llm.generate([[rng.randrange(vocab) for _ in range(n)] for n in (700, 45, 3)], params)
    outs += llm.generate([[rng.randrange(vocab) for _ in range(n)] for n in (1111,)], params)
    late = sorted({name for when, name, hit in events if when == "after_kv_cache" and not hit})
    print(json.dumps({"late": late, "info": llm.startup_report.info.get("precompile"),
                      "tokens": [o.token_ids for o in outs]}))
""")


@pytest.mark.gpu
def test_after_the_precompile_nothing_compiles_in_the_process(ckpt_factory, tmp_path):
    """Fresh caches: the precompile compiles every kernel in its workers, none compiles in the process after the KV
    cache; the next start of the same model finds the manifest and records nothing (warm), and compiles nothing;
    a start without the precompile compiles kernels in the process, and all three give the same tokens."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    model = ckpt_factory(layers=2, seed=12)
    script = tmp_path / "precompile_run.py"
    script.write_text(_RUN)
    results = {}
    for name, mode, cache in (("fresh", "auto", "a"), ("warm", "auto", "a"), ("off", "off", "b")):
        env = {**os.environ, "QUICKMOE_CACHE_DIR": str(tmp_path / f"cache_{cache}")}
        env.pop("TRITON_CACHE_DIR", None)
        run = subprocess.run([sys.executable, str(script), str(model), mode], env=env, capture_output=True,
                             text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
        results[name] = json.loads(run.stdout.strip().splitlines()[-1])
    info = results["fresh"]["info"]
    assert not info["warm"] and info["missing"] > 0 and info["compiled"] == info["missing"], info
    assert info["failed"] == 0 and len(info["slowest"]) == min(4, info["compiled"]), info
    assert results["fresh"]["late"] == [], results["fresh"]
    assert results["warm"]["info"]["warm"] is True and results["warm"]["late"] == [], results["warm"]
    assert results["off"]["info"] is None
    assert len(results["off"]["late"]) > 0, f"the check cannot fail: {results['off']}"
    assert results["fresh"]["tokens"] == results["warm"]["tokens"] == results["off"]["tokens"]


def test_the_precompile_stays_off_on_the_cpu(ckpt_factory):
    from quickmoe.llm import LLM

    llm = LLM(ckpt_factory(layers=2, seed=11), device="cpu", max_model_len=64)
    assert "precompile" not in llm.startup_report.info and llm.startup_report.phases["precompile"] is None


def test_a_manifest_whose_kernels_are_all_cached_makes_a_warm_start(tmp_path, monkeypatch):
    """The manifest decides whether a start needs the workers: all its entries in the kernel cache -> warm (no
    worker, `run` does nothing); one missing, or no manifest -> workers are started (and stopped by `close`)."""
    from quickmoe.executor.kernel_precompile import KernelPrecompile

    triton_dir = tmp_path / "triton"
    monkeypatch.setenv("QUICKMOE_CACHE_DIR", str(tmp_path / "qm"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(triton_dir))
    monkeypatch.setenv("QUICKMOE_COMPILE_WORKERS", "1")
    key = {"config": "abc", "engine": {"max_num_seqs": 4}}
    cold = KernelPrecompile(torch.device("cpu"), key)
    assert not cold.warm and cold.pool is not None and len(cold.pool.workers) == 1
    cold.close()
    assert cold.pool is None
    entries = ["AAAA/_k.json", "BBBB/_j.json"]
    for entry in entries:
        (triton_dir / entry).parent.mkdir(parents=True)
        (triton_dir / entry).write_text("{}")
    cold.manifest.parent.mkdir(parents=True)
    cold.manifest.write_text(json.dumps({"entries": entries}))
    warm = KernelPrecompile(torch.device("cpu"), key)
    assert warm.warm and warm.pool is None and warm.run([("never", lambda: 1 / 0)])["warm"] is True
    other = KernelPrecompile(torch.device("cpu"), {**key, "config": "abd"})  # another model: no manifest
    assert not other.warm
    other.close()
    (triton_dir / entries[1]).unlink()  # a kernel gone from the cache
    stale = KernelPrecompile(torch.device("cpu"), key)
    assert not stale.warm
    stale.close()


def test_a_jit_cache_hook_already_installed_is_left_alone(tmp_path, monkeypatch):
    """Someone else's Triton JIT cache hook (a profiler's) stays, and the start goes on without the precompile."""
    from triton import knobs

    from quickmoe.executor.kernel_precompile import KernelPrecompile

    monkeypatch.setenv("QUICKMOE_CACHE_DIR", str(tmp_path / "qm"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("QUICKMOE_COMPILE_WORKERS", "1")

    def theirs(**kwargs):
        return None

    monkeypatch.setattr(knobs.runtime, "jit_cache_hook", theirs)
    job = KernelPrecompile(torch.device("cpu"), {"config": "x"})
    assert not job.warm and job.pool is not None
    info = job.run([("never", lambda: 1 / 0)])
    assert info["skipped"] and job.pool is None and knobs.runtime.jit_cache_hook is theirs


def test_the_longest_kernels_are_ranked_by_the_modules_that_define_them():
    """The precompile hands workers the MoE GEMMs first, then attention and the dense GEMMs (`_LONGEST_FIRST`), by
    the module of each `@triton.jit` function. Every ranked module must define such a function, and the MoE GEMMs'
    kernels must rank first: a kernel moved to another module would otherwise fall to the back of the queue
    unnoticed (the GEMMs' move out of moe_gemm.py did)."""
    import importlib

    from quickmoe.executor.compile_workers import KernelRequest
    from quickmoe.executor.kernel_precompile import _LONGEST_FIRST, _first_the_longest

    pytest.importorskip("triton")
    from quickmoe.kernels.moe_gemm1_kernel import _gemm1_swiglu_kernel
    from quickmoe.kernels.moe_gemm2_kernel import _gemm2_kernel

    for name in _LONGEST_FIRST:
        module = importlib.import_module(name)
        # a @triton.jit function (a JITFunction, or under TRITON_INTERPRET an InterpretedFunction) keeps it as `fn`
        assert any(getattr(getattr(v, "fn", None), "__module__", None) == name for v in vars(module).values()), name

    def rank(kernel) -> int:
        request = KernelRequest(module=kernel.fn.__module__, qualname=kernel.fn.__qualname__, fn_key="",
                                spec="{}", target=("cuda", 90, 32))
        return _first_the_longest(request)

    assert rank(_gemm1_swiglu_kernel) == 0 and rank(_gemm2_kernel) == 1
