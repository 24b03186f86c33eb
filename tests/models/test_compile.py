"""Regional compilation (executor/compile.py): the number of compiled graphs does not grow with depth nor with the
layers' attention windows, and compiled layers give the eager outputs step after step when MoE layers are skipped
in random patterns, with contexts longer than the sliding window."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from quickmoe.config import EngineConfig
from quickmoe.executor.compile import (WARM_MARKER, CompileStats, _mark_warm, compile_decoder_layers, compile_stats,
                                      compile_workers_allowed, mark_static_inputs)
from quickmoe.executor.model_runner import ModelRunner

from .conftest import PagedSteps


def _runner(model_dir) -> ModelRunner:
    return ModelRunner(model_dir, EngineConfig(model=str(model_dir), device="cpu", dtype="float32"))


def _steps(runner: ModelRunner, seed: int, num_steps: int):
    """A prefill of two sequences (5 and 3 tokens), then decode steps of both (T = 2): (batch, start) pairs
    built on the fly by `run`, with fresh random token ids."""
    rng = random.Random(seed)
    vocab = runner.config.vocab_size
    steps = [[[rng.randrange(vocab) for _ in range(5)], [rng.randrange(vocab) for _ in range(3)]]]
    steps += [[[rng.randrange(vocab)], [rng.randrange(vocab)]] for _ in range(num_steps - 1)]
    return steps


def _run(runner: ModelRunner, steps, skip_patterns) -> list[torch.Tensor]:
    paged = PagedSteps(runner)
    outs = []
    with torch.inference_mode():
        for tokens, run_mlp in zip(steps, skip_patterns):
            batch = paged.batch(tokens, [0, 1])
            hidden = runner.model.model(batch, run_mlp=run_mlp)  # [T, H]
            outs.append(runner.model.lm_head(hidden))
    return outs


@pytest.mark.parametrize("layers", [2, 4, 8])
def test_compiled_graphs_do_not_grow_with_depth(ckpt_factory, layers):
    """Dynamo's graph count after a prefill and decode steps, for 2, 4 and 8 layers: one graph, for sliding and
    full attention layers alike (the window is an input, `KVGroupMetadata.window`), not one per layer or window."""
    torch._dynamo.reset()
    runner = _runner(ckpt_factory(layers=layers, seed=30))
    before = compile_stats().graphs
    compile_decoder_layers(runner.model.model.layers, backend="eager")
    steps = _steps(runner, seed=layers, num_steps=3)
    _run(runner, steps, [None] * len(steps))
    with torch.inference_mode():  # then one sequence of one token: sizes of 1 reuse the graphs
        runner.forward(PagedSteps(runner).batch([[3]], [0]))
    graphs = compile_stats().graphs - before
    windows = {layer.self_attn.window for layer in runner.model.model.layers}
    assert len(windows) == 2  # the tiny preset alternates sliding and full attention, like gpt-oss
    assert graphs == 1, f"{layers} layers compiled {graphs} graphs"


def test_the_kv_caches_are_traced_with_the_number_of_blocks_as_their_only_symbolic_size(ckpt_factory):
    """`mark_static_inputs` (what `compile_runner` calls before compiling): Dynamo traces each KV cache (and the
    storage it views) with a symbolic number of blocks and every other size as a number, and the rotary table as
    numbers, so its trace reasons about fewer symbols. The number of blocks stays symbolic: the sliding and full
    layers' groups hold different numbers of blocks here, and still share one graph."""
    torch._dynamo.reset()
    runner = _runner(ckpt_factory(layers=4, seed=34, sliding_window=4))
    blocks = {group.num_blocks for group in runner.kv_cache.plan.groups}
    assert len(blocks) == 2, blocks  # the groups differ in their number of blocks
    traced = []

    def record(gm, example_inputs):  # a backend that keeps the fake tensors Dynamo traced the inputs as
        values = [node.meta.get("example_value") for node in gm.graph.find_nodes(op="placeholder")]
        traced.append([v for v in values if isinstance(v, torch.Tensor)])
        return gm.forward

    before = compile_stats().graphs
    mark_static_inputs(runner)
    compile_decoder_layers(runner.model.model.layers, backend=record)
    _run(runner, _steps(runner, seed=5, num_steps=3), [None] * 3)
    assert compile_stats().graphs - before == 1 and len(traced) == 1
    cache = runner.kv_cache.keys[0]
    caches = [t for t in traced[0] if t.dim() == cache.dim() and t.shape[1:] == cache.shape[1:]]
    tables = [t for t in traced[0] if t.shape == runner.model.model.rotary.cos_sin_cache.shape]
    assert len(caches) >= 2 and len(tables) == 1  # a layer's k and v caches (and their storage), the rotary table
    for t in caches:
        assert isinstance(t.shape[0], torch.SymInt), t.shape
        assert all(type(size) is int for size in t.shape[1:]), t.shape
    assert all(type(size) is int for size in tables[0].shape), tables[0].shape


def test_compiled_matches_eager_when_moe_layers_are_skipped(ckpt_factory):
    """Inductor-compiled layers against eager, step after step, with each step skipping a random set of
    MoE layers (no assumption that every layer runs, or in a fixed order). The sliding layers' window (4) is shorter
    than the contexts (up to 10 positions), so the one graph that sliding and full layers share must apply each
    layer's own window."""
    torch._dynamo.reset()
    runner = _runner(ckpt_factory(layers=4, seed=31, sliding_window=4))
    assert {layer.self_attn.window for layer in runner.model.model.layers} == {None, 4}
    graphs_before = compile_stats().graphs
    steps = _steps(runner, seed=7, num_steps=6)
    rng = random.Random(8)
    patterns = [[rng.random() < 0.6 for _ in range(4)] for _ in steps]
    patterns[0] = [True, False, True, False]
    eager = _run(runner, steps, patterns)
    compile_decoder_layers(runner.model.model.layers)
    compiled = _run(runner, steps, patterns)
    assert compile_stats().graphs - graphs_before == 2  # with and without the MLP block; not one per window
    for step, (want, got) in enumerate(zip(eager, compiled)):
        assert torch.allclose(got, want, atol=1e-4, rtol=1e-4), f"step {step}: {(got - want).abs().max()}"
    skipped_everything = _run(runner, steps[:1], [[False] * 4])[0]
    assert not torch.allclose(skipped_everything, eager[0], atol=1e-3)  # skipping really changes the output


def test_runner_compiles_at_start_up_and_a_second_start_is_warm(ckpt_factory, tmp_path, monkeypatch):
    """EngineConfig(compile="on"): the start-up phase `compile` runs, the report counts the graphs (one per
    layer kind, for every token and batch size), a second start in a fresh Dynamo state finds every
    graph in the on-disk cache under the quickmoe cache directory, and greedy tokens equal the eager ones."""
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM

    monkeypatch.setenv("QUICKMOE_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):  # restored after the test
        monkeypatch.setenv(name, str(tmp_path / "unused"))
    model_dir = ckpt_factory(layers=4, seed=32)
    params = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    prompt = [5, 17, 300, 42]
    eager = LLM(model_dir, device="cpu", dtype="float32").generate([prompt], params)[0].token_ids
    reports = []
    for _ in range(2):
        torch._dynamo.reset()
        llm = LLM(model_dir, device="cpu", dtype="float32", compile="on")
        graphs_at_start_up = compile_stats().graphs
        assert llm.generate([prompt, prompt[:2]], params)[0].token_ids == eager
        assert compile_stats().graphs == graphs_at_start_up  # the warm-up covered what serving runs: no recompile
        reports.append(llm.startup_report)
    cold, warm = (r.info["compile"] for r in reports)
    assert reports[0].phases["compile"] is not None and reports[0].phases["compile"] > 0
    assert cold["graphs"] == warm["graphs"] == 1  # sliding and full layers alike, for 1 token or many
    assert cold["cache_misses"] > 0 and not cold["warm"]
    assert warm["warm"] and warm["cache_hits"] >= cold["cache_misses"]
    assert cold["cache_dir"].startswith(str(tmp_path / "cache" / "compile"))
    assert cold["backend_s"] > 0 and cold["dynamo_s"] > 0 and warm["cache_load_s"] > 0
    assert cold["codegen_runs"] == 1 and warm["codegen_runs"] == 0 and warm["codegen_s"] == 0  # warm: no codegen
    assert cold["restarts"] == warm["restarts"] == 0  # floats specialised up front: no analysis restart
    assert cold["imports_s"] >= 0 and cold["warmup_s"] >= 0
    # Inductor's compile workers only where the cache was not warm
    assert cold["workers"] and not warm["workers"]
    assert (Path(cold["cache_dir"]) / WARM_MARKER).is_file()


def test_aot_compile_saves_one_artifact_per_layer_kind_and_a_second_start_loads_them(ckpt_factory, tmp_path,
                                                                                       monkeypatch):
    """EngineConfig(compile="aot"): the first start compiles one artifact per layer kind (Qwen3-MoE with layer 1
    dense: two kinds; sliding and full attention are one) and saves it under the quickmoe cache; a second start in
    a fresh Dynamo state loads both, compiles nothing, and every layer's calls pass its artifact's guards; greedy
    tokens of a packed batch of prompts of different lengths equal the eager ones both times."""
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.executor.aot_layers import aot_available
    from quickmoe.llm import LLM

    if not aot_available():
        pytest.skip(f"torch {torch.__version__} has no AOT compile")
    monkeypatch.setenv("QUICKMOE_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):  # restored after the test
        monkeypatch.setenv(name, str(tmp_path / "unused"))
    model_dir = ckpt_factory(preset="qwen3-moe-tiny", experts_dtype=None, layers=4, experts=4, seed=33,
                             hidden_size=64, head_dim=16, moe_intermediate_size=32, intermediate_size=64,
                             mlp_only_layers=[1])
    params = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    prompts = [[5, 17, 300, 42, 9], [7, 8]]
    eager = [out.token_ids for out in LLM(model_dir, device="cpu", dtype="float32").generate(prompts, params)]
    infos = []
    for _ in range(2):
        torch._dynamo.reset()
        llm = LLM(model_dir, device="cpu", dtype="float32", compile="aot")
        graphs_at_start_up = compile_stats().graphs
        assert [out.token_ids for out in llm.generate(prompts, params)] == eager
        assert compile_stats().graphs == graphs_at_start_up  # nothing traced while serving
        assert all(layer.forward.refused == 0 for layer in llm.runner.model.model.layers)  # no eager fallback
        infos.append(llm.startup_report.info["compile"]["aot"])
    first, second = infos
    assert first["directory"].startswith(str(tmp_path / "cache" / "compile")) and first["directory"] == second["directory"]
    assert (first["artifacts_compiled"], first["artifacts_loaded"]) == (2, 0)
    assert (second["artifacts_compiled"], second["artifacts_loaded"]) == (0, 2)
    assert first["kind_of_layer"] == second["kind_of_layer"] == [0, 1, 0, 0]
    # an artifact that cannot be read is compiled again, and the start goes on
    (Path(second["directory"]) / "kind-1.bin").write_bytes(b"not an artifact")
    torch._dynamo.reset()
    llm = LLM(model_dir, device="cpu", dtype="float32", compile="aot")
    assert [out.token_ids for out in llm.generate(prompts, params)] == eager
    third = llm.startup_report.info["compile"]["aot"]
    assert (third["artifacts_compiled"], third["artifacts_loaded"]) == (1, 1)


def test_aot_compile_without_torchs_support_is_a_clear_error(monkeypatch):
    from quickmoe.errors import ConfigError
    from quickmoe.executor import aot_layers

    monkeypatch.setattr(aot_layers, "aot_available", lambda: False)
    with pytest.raises(ConfigError, match="'compile' = 'aot': torch .* has no AOT compile"):
        aot_layers.install_aot_layers(None, None, None)


def test_aot_compile_without_torchs_support_fails_before_the_weights_load(ckpt_factory, monkeypatch):
    """torch 2.11 (the GPU machine's) lacks `aot_compile`: `compile="aot"` is refused before any weight loads."""
    from quickmoe.errors import ConfigError
    from quickmoe.executor import aot_layers, runner_start
    from quickmoe.llm import LLM

    model_dir = ckpt_factory(layers=2, seed=35)
    monkeypatch.setattr(aot_layers, "aot_available", lambda: False)
    loads = []
    monkeypatch.setattr(runner_start, "load_weights", lambda *a, **k: loads.append(1))
    with pytest.raises(ConfigError, match="'compile' = 'aot': torch .* has no AOT compile"):
        LLM(model_dir, device="cpu", dtype="float32", compile="aot")
    assert not loads


def test_compile_option_is_validated():
    from quickmoe.errors import ConfigError

    with pytest.raises(ConfigError, match="'compile' = 'max': expected one of"):
        EngineConfig(compile="max")


def _gpu_case(ckpt_factory, seed: int):
    """A 4-layer checkpoint, three prompts of different lengths, greedy params, the bf16 CUDA engine options and
    the eager model's greedy tokens (no graphs, no compile): (model_dir, prompts, params, gpu, eager)."""
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM

    model_dir = ckpt_factory(layers=4, seed=seed)
    rng = random.Random(seed)
    prompts = [[rng.randrange(1000) for _ in range(n)] for n in (3, 17, 40)]
    params = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
    gpu = dict(device="cuda", dtype="bfloat16", kv_cache_memory=1 << 30)
    eager = [o.token_ids for o in LLM(model_dir, cuda_graphs="off", **gpu).generate(prompts, params)]
    return model_dir, prompts, params, gpu, eager


@pytest.mark.gpu
def test_compiled_greedy_tokens_equal_eager_on_the_gpu(ckpt_factory, tmp_path, monkeypatch):
    """On CUDA in bf16 with the Triton MoE kernels: greedy tokens of the compiled model equal the eager ones
    for prompts of different lengths decoded together."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from quickmoe.llm import LLM

    monkeypatch.setenv("QUICKMOE_COMPILE_CACHE_DIR", str(tmp_path / "compile"))
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "unused"))
    model_dir, prompts, params, gpu, eager = _gpu_case(ckpt_factory, seed=33)
    torch._dynamo.reset()
    llm = LLM(model_dir, compile="on", cuda_graphs="off", **gpu)
    assert [o.token_ids for o in llm.generate(prompts, params)] == eager
    assert llm.startup_report.info["compile"]["graphs"] == 1


@pytest.mark.gpu
def test_aot_compiled_layers_under_cuda_graphs_equal_eager_on_the_gpu(ckpt_factory, tmp_path, monkeypatch):
    """On CUDA in bf16, `compile="aot"` with the decode CUDA graphs captured over the loaded functions: the first
    start compiles and saves one artifact per layer kind, a second start in a fresh Dynamo state loads them; both
    give the greedy tokens of the eager model (no graphs, no compile), and no layer call falls back to eager."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from quickmoe.executor.aot_layers import aot_available
    from quickmoe.llm import LLM

    if not aot_available():
        pytest.skip(f"torch {torch.__version__} has no AOT compile")
    monkeypatch.setenv("QUICKMOE_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "unused"))
    model_dir, prompts, params, gpu, eager = _gpu_case(ckpt_factory, seed=34)
    counts = []
    for _ in range(2):
        torch._dynamo.reset()
        llm = LLM(model_dir, compile="aot", cuda_graphs="on", **gpu)
        assert [o.token_ids for o in llm.generate(prompts, params)] == eager
        assert all(layer.forward.refused == 0 for layer in llm.runner.model.model.layers)
        aot = llm.startup_report.info["compile"]["aot"]
        counts.append((aot["artifacts_compiled"], aot["artifacts_loaded"]))
        del llm
    assert counts == [(2, 0), (0, 2)]


def test_compiled_graphs_hold_the_custom_ops_as_single_nodes(ckpt_factory):
    """Under torch.compile the layers call the registered ops (one opaque node each), not their
    implementations, which eager mode calls directly."""
    torch._dynamo.reset()
    runner = _runner(ckpt_factory(layers=2, seed=32))
    targets: set[str] = set()

    def recording_backend(gm, example_inputs):
        targets.update(str(node.target) for node in gm.graph.nodes if node.op == "call_function")
        return gm.forward

    compile_decoder_layers(runner.model.model.layers, backend=recording_backend)
    _run(runner, _steps(runner, seed=5, num_steps=2), [None, None])
    ops = ("moe_experts", "route_experts", "attention", "fused_add_rms_norm")
    assert {f"quickmoe.{op}.default" for op in ops} <= targets, targets


@pytest.mark.parametrize("preset, overrides, kinds", [
    # Qwen3: every layer slides; layer 1 is dense, the others have experts: two kinds (by the MLP)
    ("qwen3-moe-tiny", dict(hidden_size=64, head_dim=16, moe_intermediate_size=32, intermediate_size=64,
                            mlp_only_layers=[1], use_sliding_window=True, sliding_window=8), 2),
    ("mixtral-tiny", dict(hidden_size=64, intermediate_size=64), 1),  # every layer alike: one kind
])
def test_family_models_compile_one_graph_per_layer_kind(ckpt_factory, preset, overrides, kinds):
    """Qwen3-MoE and Mixtral through the same regional compilation: one graph per layer kind (the MLP's kind; the
    attention window is an input) whatever the depth, and Inductor's compiled layers give the eager outputs."""
    torch._dynamo.reset()
    runner = _runner(ckpt_factory(preset=preset, experts_dtype=None, layers=4, experts=4, seed=34, **overrides))
    steps = _steps(runner, seed=9, num_steps=3)
    eager = _run(runner, steps, [None] * len(steps))
    before = compile_stats().graphs
    compile_decoder_layers(runner.model.model.layers)
    compiled = _run(runner, steps, [None] * len(steps))
    assert compile_stats().graphs - before == kinds
    for step, (want, got) in enumerate(zip(eager, compiled)):
        assert torch.allclose(got, want, atol=1e-4, rtol=1e-4), f"step {step}: {(got - want).abs().max()}"


def test_the_decode_graphs_static_inputs_cause_no_recompile(ckpt_factory, tmp_path, monkeypatch):
    """Decode steps through DecodeGraphs' static buffers (the padded path, capture off: what a CUDA graph replays)
    run the graphs compiled at start-up: the buffers are inference tensors like the eager path's, so no guard on
    their dispatch keys fails (on the H100 such a recompile came at the first request)."""
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.executor.cuda_graphs import DecodeGraphs, decode_buckets
    from quickmoe.llm import LLM

    monkeypatch.setenv("QUICKMOE_CACHE_DIR", str(tmp_path / "cache"))
    torch._dynamo.reset()
    llm = LLM(ckpt_factory(layers=2, seed=33), device="cpu", dtype="float32", compile="on", max_model_len=64)
    graphs = DecodeGraphs(llm.runner, decode_buckets(4), capture=False)
    llm.runner.graphs = graphs
    compiled = compile_stats().graphs
    rng = random.Random()
    prompts = [[rng.randrange(1000) for _ in range(rng.randint(2, 9))] for _ in range(3)]
    llm.generate(prompts, SamplingParams(max_tokens=5, temperature=0.0, ignore_eos=True))
    assert sum(graphs.replays.values()) > 0  # the decode steps went through the static buffers
    assert compile_stats().graphs == compiled


def test_inductor_compiles_in_process_only_while_its_workers_are_not_allowed():
    """compile_workers_allowed(False): Inductor sees one compile thread (no worker pool) inside the block, and
    its own setting again after, also when the block raises; allowed: the setting is untouched."""
    import torch._inductor.config as inductor_config
    from torch._inductor.async_compile import get_compile_threads

    before = inductor_config.compile_threads
    with compile_workers_allowed(False):
        assert get_compile_threads() == 1
    assert inductor_config.compile_threads == before
    with pytest.raises(RuntimeError, match="boom"):
        with compile_workers_allowed(False):
            raise RuntimeError("boom")
    assert inductor_config.compile_threads == before
    with inductor_config.patch(compile_threads=5), compile_workers_allowed(True):
        assert get_compile_threads() == 5


def test_the_warm_marker_is_written_only_when_every_graph_is_in_the_cache(tmp_path):
    """`_mark_warm`: written when the compile's hits and misses cover its graphs (all now cached), removed when a
    graph bypassed the cache or nothing compiled."""
    marker = tmp_path / WARM_MARKER
    _mark_warm(tmp_path, CompileStats(graphs=2, cache_hits=0, cache_misses=2))
    assert marker.is_file()
    _mark_warm(tmp_path, CompileStats(graphs=2, cache_hits=1, cache_misses=0))  # one graph bypassed the cache
    assert not marker.exists()
    _mark_warm(tmp_path, CompileStats(graphs=2, cache_hits=2, cache_misses=0))
    assert marker.is_file()
    _mark_warm(tmp_path, CompileStats(graphs=0, cache_hits=0, cache_misses=0))
    assert not marker.exists()
