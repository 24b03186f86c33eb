"""StartupReport phases and the cold-start bench (a real subprocess run on CPU)."""

from __future__ import annotations

import json
import time

import pytest

from quickmoe.bench import coldstart
from quickmoe.bench.coldstart import ColdstartOptions, format_table, run_coldstart, weights_ready_s
from quickmoe.errors import ConfigError
from quickmoe.startup.report import PHASES, StartupReport, process_age_s


def test_marks_are_contiguous_and_sum_to_total():
    report = StartupReport()
    time.sleep(0.02)
    first = report.mark("config")
    report.skip()
    time.sleep(0.01)
    second = report.mark("load")
    report.mark("load")  # adds to the phase
    assert first >= 0.02 and second >= 0.01
    assert report.phases["config"] == first and report.phases["load"] >= second
    assert report.total == pytest.approx(report.phases["config"] + report.phases["load"])
    assert report.phases["compile"] is None and list(report.phases) == list(PHASES)
    with pytest.raises(KeyError, match="unknown startup phase 'warmup'"):
        report.mark("warmup")
    block = report.format()
    assert "config" in block and "compile" in block and "total" in block
    assert json.loads(report.to_json())["phases"]["load"] == report.phases["load"]


def test_process_start_report_counts_the_interpreter():
    age = process_age_s()
    report = StartupReport.from_process_start()
    if age is None:
        pytest.skip("no /proc here")
    assert 0 < report.phases["interpreter"] <= age


def test_coldstart_options_are_validated(tmp_path):
    with pytest.raises(ConfigError, match="not a checkpoint directory"):
        ColdstartOptions(model=str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="'runs' = 0"):
        ColdstartOptions(model=str(tmp_path), runs=0)
    with pytest.raises(ConfigError, match="'baseline' = 'vllm'"):
        ColdstartOptions(model=str(tmp_path), baseline="vllm")


def test_table_shows_min_median_and_ratios():
    doc = {"model": "m", "runs": 2, "page_cache": "warm", "device": "cpu", "dtype": "float32", "summary": {
        "quickmoe": {"load": (1.0, 2.0), "process": (0.1, 0.2), "total": (3.0, 4.0)},
        "quickmoe_uncached": {"process": (1.0, 2.0), "total": (5.0, 6.0)},
        "transformers": {"from_pretrained": (7.0, 8.0), "total": (9.0, 12.0)}}}
    table = format_table(doc)
    assert "2.000 s" in table and "10.0x" in table and "3.00x" in table and "page cache warm" in table


def test_weights_ready_sums_the_phases_up_to_processing():
    ours = {"phases": {"interpreter": 0.1, "imports": 1.0, "cuda_init": 0.2, "config": 0.01, "build": 0.1,
                       "load": 0.5, "process": 0.04, "tokenizer": 0.3, "first_token": 0.7}, "total": 2.95}
    theirs = {"phases": {"interpreter": 0.1, "imports": 5.0, "from_pretrained": 3.0, "first_token": 0.5}, "total": 8.6}
    assert weights_ready_s(ours) == pytest.approx(1.95)
    assert weights_ready_s(theirs) == pytest.approx(8.1)
    assert weights_ready_s({"phases": {"imports": 1.0}, "total": 1.0}) is None


def test_table_reports_the_early_start():
    info = {"early_start": {"prefetch": {"read_bytes": 3_000_000_000, "resident_bytes": 0, "failed_files": 0,
                                         "seconds": 2.0},
                            "cuda_preinit": {"ok": True, "error": None, "context_seconds": 0.9,
                                             "host_buffer_seconds": 0.3, "host_buffer_bytes": 1 << 29}}}
    info["loader"] = {"seconds": 0.1, "direct_copies": 74_163, "copy_calls": 1_189}
    doc = {"model": "m", "runs": 1, "page_cache": "dropped", "device": "cuda:0", "dtype": "bfloat16",
           "summary": {"quickmoe": {"load": (0.2, 0.2), "weights_ready": (4.0, 4.5), "total": (5.0, 6.0)}},
           "reports": {"quickmoe": [{"phases": {}, "total": 6.0, "info": info}]},
           "load_bytes": 2_000_000_000, "pinned_h2d_gb_per_s": 40.0}
    table = format_table(doc)
    assert "10.0 GB/s over the load phase (25%), 20.0 GB/s over the streaming itself (50%)" in table
    assert "74,163 tensor pieces copied straight into their parameters in 1,189 driver calls" in table
    assert "weights_ready" in table and "4.500 s" in table
    assert "CUDA context 0.90 s" in table and "read 3.00 GB from disk" in table


def test_coldstart_starts_run_with_the_engine_options_serve_has_by_default(tmp_path):
    """The bench's timed start is `generate` with exactly the engine options of a plain `quickmoe serve DIR` (graphs
    "auto": on CUDA, so the capture phase is in the headline); --no-cuda-graphs turns graphs off; --cuda-graphs, the
    default, is still accepted."""
    from quickmoe.bench.coldstart import quickmoe_command
    from quickmoe.cli import _engine_options, build_parser

    (tmp_path / "config.json").write_text("{}")
    parser = build_parser()
    serve = _engine_options(parser.parse_args(["serve", str(tmp_path), "--device", "cuda"]))
    for flags, graphs in (([], "auto"), (["--cuda-graphs"], "auto"), (["--no-cuda-graphs"], "off")):
        bench = parser.parse_args(["bench", "coldstart", str(tmp_path), "--device", "cuda", *flags])
        opts = ColdstartOptions(model=str(tmp_path), device="cuda", cuda_graphs=bench.cuda_graphs)
        argv = quickmoe_command(opts, tmp_path)[3:]  # after `python -m quickmoe`
        assert argv[0] == "generate" and argv[argv.index("--max-tokens") + 1] == "1"
        assert _engine_options(parser.parse_args(argv)) == {**serve, "cuda_graphs": graphs}
    bench = parser.parse_args(["bench", "coldstart", str(tmp_path), "--generate-args", "--cuda-graphs-startup-max 256"])
    opts = ColdstartOptions(model=str(tmp_path), device="cuda", generate_args=tuple(bench.generate_args.split()))
    assert _engine_options(parser.parse_args(quickmoe_command(opts, tmp_path)[3:])) == {
        **serve, "cuda_graphs_startup_max": 256}


def test_cuda_graph_sizes_reach_the_engine_from_serve_and_generate(tmp_path):
    from quickmoe.cli import _engine_options, build_parser

    (tmp_path / "config.json").write_text("{}")
    parser = build_parser()
    for command in (["serve", str(tmp_path)], ["generate", str(tmp_path), "--prompt", "hi"]):
        assert _engine_options(parser.parse_args(command))["cuda_graph_sizes"] is None
        args = parser.parse_args([*command, "--cuda-graph-sizes", "1", "24,8", "16"])
        assert _engine_options(args)["cuda_graph_sizes"] == (1, 24, 8, 16)  # EngineConfig sorts them


def test_table_reports_start_up_graphs_and_the_kernel_cache():
    graphs = {"startup_batch_sizes": [1, 2, 4, 8], "deferred": [16, 32], "seconds": 0.4, "captures": [
        {"batch_size": b, "when": "startup", "warmup_s": 0.05, "capture_s": 0.05} for b in (8, 4, 2, 1)]}
    info = {"cuda_graphs": graphs, "triton_cache": {"dir": "d", "source": "quickmoe", "entries": 40,
                                                     "new_entries_startup": 0, "new_entries_first_token": 2},
            "gpu_bytes_after_load": 2**34, "gpu_peak_bytes_during_process": 2**34, "gpu_bytes_after_process": 2**34,
            "peak_host_rss_bytes": 2**30, "kv_cache": {"bytes": 50 * 2**30, "max_model_len": 131072}}
    doc = {"model": "m", "runs": 1, "page_cache": "warm", "device": "cuda:0", "dtype": "bfloat16",
           "summary": {"quickmoe": {"capture": (0.4, 0.4), "total": (5.0, 5.0)}},
           "reports": {"quickmoe": [{"phases": {}, "total": 5.0, "info": info}]}}
    table = format_table(doc)
    assert ("batch sizes [1, 2, 4, 8] captured at start-up in 0.400 s (warm-ups 0.200 s, captures 0.200 s); "
            "[16, 32] when first needed") in table
    assert "Triton kernel cache (quickmoe): 40 entries found, 0 compiled at start-up, 2 for the first token" in table
    assert "KV cache 50.00 GiB (max_model_len 131072)" in table
    assert "version key" not in table  # no outcome recorded: nothing to say
    runs = []
    for outcome in ("miss", "cached", "cached"):
        run_info = {**info, "triton_cache": {**info["triton_cache"], "triton_key": outcome}}
        runs.append({"phases": {}, "total": 5.0, "info": run_info})
    doc["reports"]["quickmoe"] = runs
    assert "Triton's version key read from the cache in 2 of 3 runs" in format_table(doc)


@pytest.mark.slow
def test_coldstart_bench_runs_fresh_processes(tmp_path, monkeypatch):
    from quickmoe.checkpoint.synth import write_checkpoint

    monkeypatch.setenv("QUICKMOE_TOKENIZER_RECOGNITION", "1")  # serve's default (tests/conftest.py turns it off)
    model = write_checkpoint(tmp_path / "model", preset="tiny", layers=2, experts=4, progress=False)  # real vocab
    out = tmp_path / "cold.json"
    doc = run_coldstart(ColdstartOptions(model=str(model), runs=2, device="cpu", json_out=str(out), import_floor=True))
    assert len(doc["reports"]["quickmoe"]) == 2
    # the floor: import torch alone, timed from the spawn like a start's phases (which hold it and more)
    assert len(doc["import_torch_s"]) == 2 and min(doc["import_torch_s"]) > 0
    # separate processes on a shared machine: the fastest bare import lies below the slowest start's weights_ready
    # (a max-against-median bound failed on a loaded CI machine: 1.67 s against 1.53 s)
    ready = [weights_ready_s(r) for r in doc["reports"]["quickmoe"]]
    assert min(doc["import_torch_s"]) < max(ready)
    assert "import torch alone" in format_table(doc) and "weights_ready adds" in format_table(doc)
    for report in doc["reports"]["quickmoe"]:
        phases = report["phases"]
        for phase in ("imports", "config", "build", "load", "process", "tokenizer", "first_token"):
            assert phases[phase] is not None and phases[phase] >= 0
        assert report["total"] >= phases["load"] + phases["first_token"]
        # the shards were read once before the runs: the early start's prefetch finds them all cached
        shard_bytes = sum(f.stat().st_size for f in model.glob("*.safetensors"))
        prefetch = report["info"]["early_start"]["prefetch"]
        assert prefetch["read_bytes"] + prefetch["resident_bytes"] == shard_bytes
        assert "cuda_preinit" not in report["info"]["early_start"]  # --device cpu
        assert 0 < report["info"]["early_start"]["tokenizer"]["seconds"] < report["total"]
        # gpt-oss's tokenizer.json, decided after the untimed start: every timed start runs it as o200k_harmony
        assert report["info"]["early_start"]["tokenizer"]["kind"] == "O200kHarmonyTokenizer"
    assert "tokenizer " in format_table(doc).split("early start:")[1].splitlines()[0]
    assert "tokenizer.json recognised as o200k_harmony" in format_table(doc)
    assert json.loads(out.read_text())["summary"]["quickmoe"]["total"][0] > 0


@pytest.mark.slow
def test_coldstart_bench_times_compiled_starts_cold_and_warm(tmp_path, monkeypatch):
    """--compile: compiled starts with fresh compile caches (every graph compiled) and then with shared,
    filled ones (every graph loaded from the cache), each run a fresh process."""
    from quickmoe.checkpoint.synth import write_checkpoint

    # as a user's shell: no TRITON_CACHE_DIR (an LLM made earlier in this process set its own)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    monkeypatch.setenv("QUICKMOE_CACHE_DIR", str(tmp_path / "cache"))

    model = write_checkpoint(tmp_path / "model", preset="tiny", layers=2, experts=4, progress=False)
    runs = []  # (compiled, compile cache dir) of every start, timed or not, in order
    one_run = coldstart._one_run

    def spy(cmd, env):
        runs.append(("--compile" in cmd, env.get("QUICKMOE_COMPILE_CACHE_DIR")))
        return one_run(cmd, env)

    monkeypatch.setattr(coldstart, "_one_run", spy)
    doc = run_coldstart(ColdstartOptions(model=str(model), runs=1, device="cpu", compile="on"))
    (cold,), (warm,) = doc["reports"]["compiled_cold"], doc["reports"]["compiled_warm"]
    # before the fresh-cache series, one untimed compiled start with caches of its own (it fills Python's bytecode
    # cache with Dynamo's and Inductor's, as the first untimed start did with torch's)
    first_compiled = next(i for i, (compiled, _) in enumerate(runs) if compiled)
    assert runs[first_compiled][1] is not None
    assert runs[first_compiled + 1][0] and runs[first_compiled + 1][1] != runs[first_compiled][1]
    assert cold["info"]["compile"]["cache_dir"].startswith(runs[first_compiled + 1][1])
    assert cold["info"]["compile"]["workers"] and not warm["info"]["compile"]["workers"]
    assert cold["phases"]["compile"] > 0 and warm["phases"]["compile"] > 0
    assert cold["info"]["compile"]["cache_misses"] > 0 and not cold["info"]["compile"]["warm"]
    assert warm["info"]["compile"]["warm"] and warm["info"]["compile"]["cache_hits"] > 0
    assert doc["reports"]["quickmoe"][0]["phases"]["compile"] is None  # the plain series stays eager
    # fresh caches are fresh for Triton's kernels too; the plain series uses the persistent kernel cache
    kernels = {name: doc["reports"][name][0]["info"]["triton_cache"] for name in ("quickmoe", "compiled_cold",
                                                                                  "compiled_warm")}
    assert kernels["quickmoe"]["source"] == "quickmoe" and kernels["compiled_cold"]["source"] == "user"
    assert kernels["compiled_cold"]["entries"] == 0 and len({k["dir"] for k in kernels.values()}) == 3
    assert "compile cold" in format_table(doc) and "compile warm" in format_table(doc)


def test_table_compares_compile_time_across_depths(tmp_path):
    doc = {"model": "m24", "runs": 1, "page_cache": "warm", "device": "cuda:0", "dtype": "bfloat16",
           "summary": {"quickmoe": {"total": (3.0, 3.0)},
                       "compiled_cold": {"compile": (9.0, 10.0), "capture": (0.5, 0.6), "total": (20.0, 21.0)},
                       "compiled_compare": {"compile": (7.5, 8.0), "total": (15.0, 15.0)}},
           "compile_compare": {"model": "m2", "layers": 2, "model_layers": 24}}
    table = format_table(doc)
    assert "24 layers 10.00 s, 2 layers 8.00 s = 1.25x" in table and "fewer layers min" in table
    assert "capture" in table
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="'compile_compare' needs 'compile'"):
        ColdstartOptions(model=str(tmp_path), compile_compare=str(tmp_path))
    with pytest.raises(ConfigError, match="'compile_compare' = .*not a checkpoint"):
        ColdstartOptions(model=str(tmp_path), compile=True, compile_compare=str(tmp_path / "nope"))


def test_table_reports_the_kernel_precompile_of_runs_that_compiled():
    """A series whose runs compiled ahead gets a line with the kernels, workers and seconds (medians); a series
    whose runs all found their manifest gets none."""
    def run(info):
        return {"phases": {}, "total": 5.0, "info": info}

    warm = {"precompile": {"warm": True, "manifest": "m.json"}}
    compiled = [{"precompile": {"warm": False, "kernels": 61, "missing": m, "compiled": m - f, "failed": f,
                                "workers": 16, "compile_s": s, "worker_seconds": 70.0 + m,
                                "slowest": [f"moe_gemm1_kernel._gemm1_kernel {s:.2f} s"]}}
                for m, f, s in ((61, 0, 6.0), (60, 1, 7.0), (59, 0, 8.0))]
    doc = {"model": "m", "runs": 3, "page_cache": "warm", "device": "cuda:0", "dtype": "bfloat16",
           "summary": {"quickmoe": {"total": (5.0, 5.0)}, "cold_kernels": {"total": (20.0, 20.0)}},
           "reports": {"quickmoe": [run(warm)] * 3, "cold_kernels": [run(i) for i in compiled]}}
    table = format_table(doc)
    assert ("empty kernel cache: kernel precompile: 61 kernels recorded, 60 not in the cache, 59 compiled ahead in "
            "7.00 s by 16 worker processes (130.0 s of compiling) (medians); slowest to compile in the first run: "
            "moe_gemm1_kernel._gemm1_kernel 6.00 s") in table
    assert table.count("kernel precompile") == 1  # the warm series says nothing
