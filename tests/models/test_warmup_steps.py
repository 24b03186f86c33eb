"""Warm-up steps of prefill shapes (engine/warmup_steps.py) and the MoE warm-up's groups (executor/kernel_warmup.py):
the shapes stay inside the engine's limits; a warm-up step takes its KV blocks from the block manager and gives
them back, so the prefix cache of earlier requests still serves them and their outputs do not move; on the GPU,
after the idle work no prefill compiles a Triton kernel, and without the warm-up steps one does (the test can
fail)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap

import pytest
import torch

from quickmoe.engine.warmup_steps import StepShapeWarmup, warmup_step_shapes
from quickmoe.executor.kernel_warmup import WARM_THREADS, MoEKernelWarmup, warmup_token_counts


@pytest.mark.parametrize("budget,max_len,max_seqs", [(8192, 131072, 256), (2048, 4096, 64), (512, 300, 4),
                                                      (64, 64, 2), (16, 4096, 1)])
def test_the_warmup_steps_fit_the_engines_limits(budget, max_len, max_seqs):
    steps = warmup_step_shapes(budget, max_len, max_seqs)
    assert steps and steps[0] == [(0, min(1000, budget, max_len))]
    for step in steps:
        assert sum(count for _, count in step) <= budget
        assert len(step) <= max_seqs
        assert all(start + count <= max_len and count >= 1 for start, count in step)
    if max_seqs > 1:  # a mixed step: one prompt chunk and decode rows
        mixed = steps[1]
        assert mixed[0][0] == 0 and all(count == 1 and start > 0 for start, count in mixed[1:])
        assert sum(count for _, count in mixed) == min(1024, budget, max_len)
    else:
        assert len(steps) == 1


def test_the_moe_warmup_groups_cover_the_ladder_in_order_within_the_row_budget():
    for budget in (8192, 2048, 100, 1):
        warmup = MoEKernelWarmup.__new__(MoEKernelWarmup)
        warmup.pending, warmup.max_rows = warmup_token_counts(budget), budget
        seen = []
        while warmup.pending:
            group = warmup.next_group()
            assert 1 <= len(group) <= WARM_THREADS
            assert len(group) == 1 or sum(group) <= budget
            del warmup.pending[:len(group)]
            seen += group
        assert seen == warmup_token_counts(budget)


def test_a_size_whose_thread_failed_is_warmed_again_on_the_calling_thread(monkeypatch):
    """A thread's failure (a served run's first launch of a kernel failed inside Triton's launcher on the H200)
    does not end the idle work: that size is warmed again on the caller's thread; a failure there is raised."""
    import threading

    main = threading.current_thread()
    calls, failing = [], {3: 1, 5: 1}  # sizes whose first warm raises
    lock = threading.Lock()

    def warm(tokens, stream):
        with lock:
            calls.append((tokens, threading.current_thread() is main))
            if failing.get(tokens, 0) > 0:
                failing[tokens] -= 1
                raise TypeError("function takes exactly 58 arguments (51 given)")

    warmup = MoEKernelWarmup.__new__(MoEKernelWarmup)
    warmup.layers = [torch.nn.Linear(2, 2)]
    warmup.warm = warm
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: "stream")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    warmup._warm_group([1, 2, 3, 4, 5])
    on_threads = sorted(t for t, here in calls if not here)
    assert on_threads == [1, 2, 3, 4, 5] and [t for t, here in calls if here] == [3, 5]
    failing[4] = 2  # fails on its thread and again on the caller's
    with pytest.raises(TypeError):
        warmup._warm_group([1, 4])

def _forced_warmup(engine) -> StepShapeWarmup:
    """The engine's warm-up steps, on a CPU engine too (where they are off)."""
    sched = engine.scheduler
    return StepShapeWarmup(engine.blocks, engine.runner, vocab_size=engine.config.vocab_size,
                           max_num_batched_tokens=sched.max_num_batched_tokens, max_model_len=engine.max_model_len,
                           max_num_seqs=sched.max_num_seqs, enabled=True)


def test_a_warmup_step_gives_its_blocks_back_and_leaves_the_prefix_cache_intact(ckpt_factory):
    """A request, the warm-up steps forced on (a CPU engine has none), the same request again: it hits the prefix
    cache and its greedy tokens are the same; every block the steps took is free again."""
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM

    llm = LLM(ckpt_factory(layers=2, seed=11, sliding_window=8), device="cpu", max_model_len=256,
              max_num_batched_tokens=256, max_num_seqs=8, num_kv_blocks=96)
    engine = llm.engine
    rng = random.Random(5)
    prompt = [rng.randrange(llm.config.vocab_size - 2) for _ in range(70)]
    params = SamplingParams(max_tokens=6, temperature=0, ignore_eos=True)
    first = llm.generate([prompt], params)[0].token_ids
    free = {name: pool.num_free for name, pool in engine.blocks.pools.items()}
    cached = engine.blocks.num_cached_blocks()
    assert cached > 0, "the check cannot fail: nothing is in the prefix cache"
    warmup = _forced_warmup(engine)
    assert warmup.pending == warmup_step_shapes(256, 256, 8)
    steps = 0
    while warmup.warm_next():
        steps += 1
    assert steps == 2 and not warmup.pending
    assert {name: pool.num_free for name, pool in engine.blocks.pools.items()} == free
    assert engine.blocks.num_cached_blocks() == cached
    hits = engine.scheduler.num_prefix_hits
    assert llm.generate([prompt], params)[0].token_ids == first
    assert engine.scheduler.num_prefix_hits > hits


def test_a_warmup_step_that_finds_no_room_is_dropped(ckpt_factory):
    from quickmoe.llm import LLM

    llm = LLM(ckpt_factory(layers=2, seed=11, sliding_window=8), device="cpu", max_model_len=320,
              max_num_batched_tokens=2048, num_kv_blocks=20)  # 20 blocks of 16: one sequence of 320 tokens
    blocks = llm.engine.blocks
    blocks.allocate(123, 0, 16)  # a request holds one block: neither 320-token step fits
    free = [pool.num_free for pool in blocks.pools.values()]
    warmup = _forced_warmup(llm.engine)
    assert warmup.warm_next() and warmup.warm_next() and not warmup.warm_next()
    assert [pool.num_free for pool in blocks.pools.values()] == free and blocks.num_sequences == 1 and blocks.holds(123)


_COUNT_COMPILES = textwrap.dedent("""
    import json, random, sys
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM

    def _jit_functions():
        import triton
        found = {}
        for name, module in list(sys.modules.items()):
            if name.startswith("quickmoe.kernels") and module is not None:
                for value in vars(module).values():
                    if isinstance(value, triton.runtime.jit.JITFunction):
                        found[id(value)] = value
        return found.values()

    def count():
        return sum(len(c[0]) for f in _jit_functions() for c in f.device_caches.values())

    model, steps = sys.argv[1], sys.argv[2] == "1"
    # a fixed KV cache: the GPU tests' parts run side by side, so the free memory is not this process's to take;
    # no prompt-step graphs: the steps with prompt tokens run eagerly, the path the warm-up steps prepare (with the
    # graphs, which the idle work captures, both runs compiled nothing: the check could not fail)
    llm = LLM(model, device="cuda", max_model_len=4096, max_num_batched_tokens=2048, cuda_graphs_startup_max=1,
              kv_cache_memory=1 << 30, cuda_graphs_prefill_tokens=0)
    if not steps:
        llm.engine.step_warmup.pending = []
    llm.engine.finish_idle_work()
    before = count()
    rng = random.Random(3)
    vocab = llm.config.vocab_size - 2
    params = SamplingParams(max_tokens=3, temperature=0, ignore_eos=True)
    llm.generate([[rng.randrange(vocab) for _ in range(n)] for n in (700, 45)], params)
    llm.generate([[rng.randrange(vocab) for _ in range(n)] for n in (1111,)], params)
    print(json.dumps({"before": before, "after": count()}))
""")


@pytest.mark.gpu
def test_after_the_idle_work_a_prefill_compiles_no_kernel(ckpt_factory, tmp_path):
    """In fresh processes with empty kernel caches and eager steps of prompt tokens (no prompt-step graphs): with
    the warm-up steps, prompts of new lengths (a prefill alone, two prompts in one step, decode steps after them)
    compile nothing; without them they do."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    import gc

    gc.collect()
    torch.cuda.empty_cache()  # what earlier tests' engines left cached in this process: the fresh processes need it
    model = ckpt_factory(layers=2, seed=12)
    script = tmp_path / "count_compiles.py"
    script.write_text(_COUNT_COMPILES)
    results = {}
    for steps in ("1", "0"):
        env = {**os.environ, "QUICKMOE_CACHE_DIR": str(tmp_path / f"cache{steps}")}
        env.pop("TRITON_CACHE_DIR", None)
        run = subprocess.run([sys.executable, str(script), str(model), steps], env=env, capture_output=True,
                             text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
        results[steps] = json.loads(run.stdout.strip().splitlines()[-1])
    assert results["1"]["after"] == results["1"]["before"], results
    assert results["0"]["after"] > results["0"]["before"], f"the check cannot fail: {results}"


def test_an_engine_is_freed_as_soon_as_it_is_dropped(ckpt_factory):
    """No reference cycle through the engine (the warm-up steps hold its parts, not it): a sharded engine's
    process group must go when the LLM does, not at some collection during the interpreter's shutdown (under
    torchrun such a late teardown aborted rank 0 now and then)."""
    import gc
    import weakref

    from quickmoe.llm import LLM

    llm = LLM(ckpt_factory(layers=2, seed=11, sliding_window=8), device="cpu", max_model_len=64)
    engine, runner = weakref.ref(llm.engine), weakref.ref(llm.runner)
    gc.collect()
    gc.disable()
    try:
        del llm
        assert engine() is None and runner() is None
    finally:
        gc.enable()
