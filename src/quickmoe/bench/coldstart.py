"""`quickmoe bench coldstart DIR`: process start -> first token, in fresh subprocesses, phase by phase.

Each run is a new `quickmoe generate DIR --max-tokens 1` process with the engine options `quickmoe serve` has by
default (so on CUDA its decode CUDA graphs are captured: the `capture` phase is in the headline; `--no-cuda-graphs`
turns them off for comparison) that writes its StartupReport; the bench prints min and median per phase over N
runs, with the page-cache state: warm (every shard read once before the runs) or dropped before each run
(`--drop-caches`, needs root). The Triton kernel cache is the persistent one a server uses, filled by one untimed
run first; `--compare-cold-kernels` adds runs that each start with an empty one. `--compare-uncached` repeats the
runs with the PermutationCache disabled (indices rebuilt per expert) and prints the ratio of the processing phase;
`--baseline transformers` runs transformers' from_pretrained + one forward on the same checkpoint the same way,
side by side (one untimed run first too). Every run inherits the bytecode cache the bench's own process set up
(startup/bytecode_cache.py; QUICKMOE_BYTECODE_CACHE=off for none), the baseline's included. `--compile` adds
compiled starts with fresh caches (compile and Triton; one untimed compiled start with caches thrown away first,
so that they read Dynamo's and Inductor's bytecode from the bytecode cache as every other run reads torch's) and
then with warm ones. `--import-floor` times
`import torch` alone in fresh processes with the same environment (the bytecode cache included), the floor of
weights_ready, and prints what start-up adds to it.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from quickmoe.bench.coldstart_report import format_table
from quickmoe.errors import ConfigError
from quickmoe.tokenizer.recognise import decide_now

logger = logging.getLogger(__name__)

BASELINES = ("none", "transformers")


@dataclass(frozen=True)
class ColdstartOptions:
    """What `bench coldstart` runs; validated at construction."""

    model: str
    runs: int = 3
    device: str = "auto"
    drop_caches: bool = False
    compare_uncached: bool = False
    baseline: str = "none"
    json_out: str | None = None
    compile: str = "off"  # "on"/"aot": also time `--compile MODE` starts: fresh compile caches per run, then warm ones
    cuda_graphs: bool = True  # serve's default (graphs on CUDA); False: every start with `--cuda-graphs off`
    compile_compare: str | None = None  # also time fresh-cache compiled starts of this checkpoint (fewer layers)
    compare_cold_kernels: bool = False  # also time starts that each begin with an empty Triton kernel cache
    generate_args: tuple[str, ...] = ()  # appended to every quickmoe start (comparisons with other engine options)
    import_floor: bool = False  # also time `import torch` alone in fresh processes (the floor of weights_ready)

    def __post_init__(self) -> None:
        if not (Path(self.model) / "config.json").is_file():
            raise ConfigError(f"bench coldstart: {self.model} is not a checkpoint directory (no config.json)")
        if self.runs < 1:
            raise ConfigError(f"bench coldstart option 'runs' = {self.runs}: expected an integer >= 1")
        if self.compile_compare is not None and not (Path(self.compile_compare) / "config.json").is_file():
            raise ConfigError(f"bench coldstart option 'compile_compare' = {self.compile_compare!r}: not a checkpoint "
                              "directory (no config.json)")
        if self.compile not in ("off", "on", "aot"):
            raise ConfigError(f"bench coldstart option 'compile' = {self.compile!r}: expected one of "
                              "['off', 'on', 'aot']")
        if self.compile_compare is not None and self.compile == "off":
            raise ConfigError("bench coldstart option 'compile_compare' needs 'compile' (--compile)")
        if self.baseline not in BASELINES:
            raise ConfigError(f"bench coldstart option 'baseline' = {self.baseline!r}: expected one of "
                              f"{list(BASELINES)}")


def drop_page_cache() -> None:
    """Write dirty pages, then drop the page cache (Linux, root)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as exc:
        raise ConfigError(f"--drop-caches: cannot write /proc/sys/vm/drop_caches ({exc}); it needs root on Linux"
                          ) from None


def warm_page_cache(model_dir: Path) -> None:
    """Read every file of the checkpoint once so the runs start from a warm page cache."""
    for path in sorted(model_dir.iterdir()):
        if path.is_file():
            with open(path, "rb", buffering=0) as f:
                while f.read(1 << 24):
                    pass


def measure_pinned_h2d_gb_per_s(nbytes: int = 1 << 30, repeats: int = 10) -> float | None:
    """Median pinned host->device copy rate on this machine's first GPU (None without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return None
    host = torch.randint(0, 255, (nbytes,), dtype=torch.uint8).pin_memory()  # random bytes, never zeros
    dev = torch.empty_like(host, device="cuda")
    times = []
    for _ in range(repeats + 2):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dev.copy_(host, non_blocking=True)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return nbytes / statistics.median(times[2:]) / 1e9  # the first two are warm-up


def _one_run(cmd: list[str], env: dict[str, str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        proc = subprocess.run([*cmd, "--json", str(out)] if "transformers_baseline" in " ".join(cmd)
                              else [*cmd, "--startup-json", str(out)], env=env, capture_output=True, text=True)
        if proc.returncode != 0 or not out.is_file():
            raise RuntimeError(f"cold-start run failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                               f"{proc.stderr[-4000:]}")
        return json.loads(out.read_text())


_IMPORT_TORCH = "import time; import torch; print(repr(time.time()))"


def time_import_torch(env: dict[str, str], runs: int) -> list[float]:
    """Seconds from spawning `python -c "import torch"` to torch imported, in `runs` fresh processes with `env` (the
    runs' environment, so the same bytecode cache as quickmoe's starts; one untimed process first, as quickmoe's):
    the part of weights_ready no start-up work can remove. A process start-up and a bare import read alike."""
    subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, check=True)
    seconds = []
    for _ in range(runs):
        spawned = time.time()
        proc = subprocess.run([sys.executable, "-c", _IMPORT_TORCH], env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"import torch failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        seconds.append(float(proc.stdout.split()[-1]) - spawned)
    return seconds


def caches_env(env: dict[str, str], directory: str) -> dict[str, str]:
    """`env` with the compile caches and the Triton kernel cache under `directory`."""
    return {**env, "QUICKMOE_COMPILE_CACHE_DIR": directory, "TRITON_CACHE_DIR": str(Path(directory) / "triton")}


def _series(opts: ColdstartOptions, cmd: list[str], env: dict[str, str], label: str,
            fresh_caches: bool = False) -> list[dict]:
    """opts.runs runs of cmd; with fresh_caches each gets empty compile and Triton cache directories."""
    reports = []
    for i in range(opts.runs):
        if opts.drop_caches:
            drop_page_cache()
        with tempfile.TemporaryDirectory() as fresh:
            reports.append(_one_run(cmd, caches_env(env, fresh) if fresh_caches else env))
        logger.info("%s run %d/%d: %.2f s to first token", label, i + 1, opts.runs, reports[-1]["total"])
    return reports


# Phases up to and including these make "process start -> weights resident and processed" (transformers'
# baseline: its from_pretrained, which also leaves the weights on the device ready to run).
READY_PHASES = ("interpreter", "imports", "cuda_init", "config", "build", "load", "process", "from_pretrained")


def weights_ready_s(report: dict) -> float | None:
    """Seconds from process creation to weights resident and processed (None if the run has no such phase)."""
    phases = report["phases"]
    if phases.get("process") is None and phases.get("from_pretrained") is None:
        return None
    return sum(phases.get(p) or 0.0 for p in READY_PHASES)


def _summary(reports: list[dict]) -> dict[str, tuple[float, float]]:
    """phase -> (min, median) over the runs that measured it; 'weights_ready' and 'total' included."""
    phases: dict[str, list[float]] = {}
    for r in reports:
        for name, value in [*r["phases"].items(), ("weights_ready", weights_ready_s(r)), ("total", r["total"])]:
            if value is not None:
                phases.setdefault(name, []).append(value)
    return {name: (min(v), statistics.median(v)) for name, v in phases.items()}


def quickmoe_command(opts: ColdstartOptions, directory: Path) -> list[str]:
    """One timed start: `quickmoe generate DIR --max-tokens 1` with serve's default engine options (graphs: auto),
    or with `--cuda-graphs off` when opts.cuda_graphs is False; then opts.generate_args."""
    cmd = [sys.executable, "-m", "quickmoe", "generate", str(directory), "--prompt", "Hello world",
           "--max-tokens", "1", "--temperature", "0", "--device", opts.device, "-q"]
    return cmd + ([] if opts.cuda_graphs else ["--cuda-graphs", "off"]) + list(opts.generate_args)


def run_coldstart(opts: ColdstartOptions) -> dict:
    model_dir = Path(opts.model)
    if not opts.drop_caches:
        warm_page_cache(model_dir)
    env = dict(os.environ)
    quickmoe_cmd = quickmoe_command(opts, model_dir)
    _one_run(quickmoe_cmd, env)  # untimed: fills the persistent Triton kernel cache, as a server's first start did
    # and what that start left to decide in the background (tokenizer/recognise.py): every timed start then finds
    # the verdict, as a server's second start does
    decide_now(model_dir / "tokenizer.json")
    results = {"quickmoe": _series(opts, quickmoe_cmd, env, "quickmoe")}
    if opts.compare_cold_kernels:
        results["cold_kernels"] = _series(opts, quickmoe_cmd, env, "quickmoe, empty Triton kernel cache",
                                          fresh_caches=True)
    if opts.compare_uncached:
        results["quickmoe_uncached"] = _series(opts, quickmoe_cmd, {**env, "QUICKMOE_PERMUTATION_CACHE": "0"},
                                               "quickmoe (PermutationCache off)")
    if opts.compile != "off":
        compiled_cmd = [*quickmoe_cmd, "--compile", opts.compile]
        with tempfile.TemporaryDirectory() as scratch:
            # untimed, with caches thrown away after: Python's bytecode of Dynamo, Inductor and what they import at
            # compile time lands in the bytecode cache, as torch's did in the first untimed run, so "fresh caches"
            # means empty compile and kernel caches, not compiling Inductor's Python (7-9 s more on the H200)
            _one_run(compiled_cmd, caches_env(env, scratch))
        results["compiled_cold"] = _series(opts, compiled_cmd, env, f"quickmoe --compile {opts.compile}, fresh caches",
                                           fresh_caches=True)
        with tempfile.TemporaryDirectory() as shared:
            warm_env = caches_env(env, shared)
            _one_run(compiled_cmd, warm_env)  # fills the caches (untimed)
            results["compiled_warm"] = _series(opts, compiled_cmd, warm_env,
                                               f"quickmoe --compile {opts.compile}, warm caches")
        if opts.compile_compare:
            results["compiled_compare"] = _series(
                opts, [*quickmoe_command(opts, Path(opts.compile_compare)), "--compile", opts.compile], env,
                f"quickmoe --compile {opts.compile}, fresh caches, {opts.compile_compare}", fresh_caches=True)
    if opts.baseline == "transformers":
        device = opts.device if opts.device != "auto" else "cuda"
        hf_cmd = [sys.executable, "-m", "quickmoe.bench.transformers_baseline", str(model_dir), "--device", device]
        _one_run(hf_cmd, env)  # untimed, as quickmoe's first: its runs then read the bytecode cache as quickmoe's do
        results["transformers"] = _series(opts, hf_cmd, env, "transformers")
    summary = {name: _summary(reports) for name, reports in results.items()}
    import_torch = time_import_torch(env, opts.runs) if opts.import_floor else None
    info = results["quickmoe"][0].get("info", {})
    doc = {"model": str(model_dir), "runs": opts.runs, "page_cache": "dropped" if opts.drop_caches else "warm",
           "device": info.get("device"), "dtype": info.get("dtype"), "summary": summary, "reports": results,
           "load_bytes": info.get("load_bytes"), "import_torch_s": import_torch,
           "pinned_h2d_gb_per_s": measure_pinned_h2d_gb_per_s() if str(info.get("device")).startswith("cuda")
           else None}
    if opts.compile_compare:
        doc["compile_compare"] = {"model": opts.compile_compare, "layers": _num_layers(Path(opts.compile_compare)),
                                  "model_layers": _num_layers(model_dir)}
    print(format_table(doc))
    if opts.json_out:
        Path(opts.json_out).write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def _num_layers(model_dir: Path) -> int | None:
    return json.loads((model_dir / "config.json").read_text()).get("num_hidden_layers")
