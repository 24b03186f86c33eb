"""`quickmoe bench coldstart DIR`: process start -> first token, in fresh subprocesses, phase by phase.

Each run is a new `quickmoe generate DIR --max-tokens 1` process that writes its StartupReport; the
bench prints min and median per phase over N runs, with the page-cache state: warm (every shard read
once before the runs) or dropped before each run (`--drop-caches`, needs root). `--compare-uncached`
repeats the runs with the PermutationCache disabled (indices rebuilt per expert) and prints the
ratio of the processing phase; `--baseline transformers` runs transformers' from_pretrained + one
forward on the same checkpoint the same way, side by side.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from quickmoe.errors import ConfigError

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
    compile: bool = False  # also time `--compile on` starts: fresh compile caches per run, then warm ones
    cuda_graphs: bool = False  # every quickmoe start captures its decode CUDA graphs (`--cuda-graphs on`)
    compile_compare: str | None = None  # also time fresh-cache compiled starts of this checkpoint (fewer layers)

    def __post_init__(self) -> None:
        if not (Path(self.model) / "config.json").is_file():
            raise ConfigError(f"bench coldstart: {self.model} is not a checkpoint directory (no config.json)")
        if self.runs < 1:
            raise ConfigError(f"bench coldstart option 'runs' = {self.runs}: expected an integer >= 1")
        if self.compile_compare is not None and not (Path(self.compile_compare) / "config.json").is_file():
            raise ConfigError(f"bench coldstart option 'compile_compare' = {self.compile_compare!r}: not a checkpoint "
                              "directory (no config.json)")
        if self.compile_compare is not None and not self.compile:
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


def _series(opts: ColdstartOptions, cmd: list[str], env: dict[str, str], label: str,
            fresh_compile_cache: bool = False) -> list[dict]:
    """opts.runs runs of cmd; with fresh_compile_cache each gets an empty compile cache directory."""
    reports = []
    for i in range(opts.runs):
        if opts.drop_caches:
            drop_page_cache()
        with tempfile.TemporaryDirectory() as fresh:
            run_env = {**env, "QUICKMOE_COMPILE_CACHE_DIR": fresh} if fresh_compile_cache else env
            reports.append(_one_run(cmd, run_env))
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


def run_coldstart(opts: ColdstartOptions) -> dict:
    model_dir = Path(opts.model)
    if not opts.drop_caches:
        warm_page_cache(model_dir)
    env = dict(os.environ)
    def quickmoe_cmd_for(directory: Path) -> list[str]:
        cmd = [sys.executable, "-m", "quickmoe", "generate", str(directory), "--prompt", "Hello world",
               "--max-tokens", "1", "--temperature", "0", "--device", opts.device, "-q"]
        return cmd + (["--cuda-graphs", "on"] if opts.cuda_graphs else [])

    quickmoe_cmd = quickmoe_cmd_for(model_dir)
    results = {"quickmoe": _series(opts, quickmoe_cmd, env, "quickmoe")}
    if opts.compare_uncached:
        results["quickmoe_uncached"] = _series(opts, quickmoe_cmd, {**env, "QUICKMOE_PERMUTATION_CACHE": "0"},
                                               "quickmoe (PermutationCache off)")
    if opts.compile:
        compiled_cmd = [*quickmoe_cmd, "--compile", "on"]
        results["compiled_cold"] = _series(opts, compiled_cmd, env, "quickmoe --compile on, fresh caches",
                                           fresh_compile_cache=True)
        with tempfile.TemporaryDirectory() as shared:
            warm_env = {**env, "QUICKMOE_COMPILE_CACHE_DIR": shared}
            _one_run(compiled_cmd, warm_env)  # fills the caches (untimed)
            results["compiled_warm"] = _series(opts, compiled_cmd, warm_env, "quickmoe --compile on, warm caches")
        if opts.compile_compare:
            results["compiled_compare"] = _series(
                opts, [*quickmoe_cmd_for(Path(opts.compile_compare)), "--compile", "on"], env,
                f"quickmoe --compile on, fresh caches, {opts.compile_compare}", fresh_compile_cache=True)
    if opts.baseline == "transformers":
        device = opts.device if opts.device != "auto" else "cuda"
        hf_cmd = [sys.executable, "-m", "quickmoe.bench.transformers_baseline", str(model_dir), "--device", device]
        results["transformers"] = _series(opts, hf_cmd, env, "transformers")
    summary = {name: _summary(reports) for name, reports in results.items()}
    info = results["quickmoe"][0].get("info", {})
    doc = {"model": str(model_dir), "runs": opts.runs, "page_cache": "dropped" if opts.drop_caches else "warm",
           "device": info.get("device"), "dtype": info.get("dtype"), "summary": summary, "reports": results,
           "load_bytes": info.get("load_bytes"),
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


def _early_start_line(infos: list[dict]) -> str:
    """One line on the background start-up work (medians over the runs)."""
    parts = []
    pre = [i["cuda_preinit"] for i in infos if "cuda_preinit" in i]
    if pre and all(p["ok"] for p in pre):
        parts.append(f"CUDA context {statistics.median(p['context_seconds'] for p in pre):.2f} s + page-locked ring "
                     f"{statistics.median(p['host_buffer_seconds'] for p in pre):.2f} s on a thread during imports")
    elif pre:
        parts.append(f"CUDA pre-initialisation failed ({pre[0]['error']})")
    fetch = [i["prefetch"] for i in infos if "prefetch" in i]
    if fetch:
        parts.append(f"page-cache prefetch read {statistics.median(f['read_bytes'] for f in fetch) / 1e9:.2f} GB "
                     f"from disk, found {statistics.median(f['resident_bytes'] for f in fetch) / 1e9:.2f} GB cached")
    return "early start: " + ("; ".join(parts) if parts else "off")


def format_table(doc: dict) -> str:
    summary = doc["summary"]
    columns = list(summary)
    labels = {"quickmoe": "quickmoe", "quickmoe_uncached": "no-perm-cache", "compiled_cold": "compile cold",
              "compiled_warm": "compile warm", "compiled_compare": "fewer layers", "transformers": "transformers"}
    phases = list(dict.fromkeys(p for s in summary.values() for p in s))
    phases = [p for p in phases if p not in ("weights_ready", "total")] + ["weights_ready", "total"]
    head = f"{'phase':<16}" + "".join(f"{labels[c] + ' min':>22}{'median':>12}" for c in columns)
    lines = [f"cold start of {doc['model']} ({doc['runs']} runs each, page cache {doc['page_cache']}, "
             f"device {doc['device']}, {doc['dtype']})", head]
    for p in phases:
        row = f"{p:<16}"
        for c in columns:
            lo, med = summary[c].get(p, (None, None))
            row += f"{'-':>22}{'-':>12}" if lo is None else f"{lo:>20.3f} s{med:>10.3f} s"
        lines.append(row)
    reports = doc.get("reports", {}).get("quickmoe", [])
    if reports and "gpu_peak_bytes_during_process" in reports[0].get("info", {}):
        i = reports[0]["info"]
        lines.append(f"GPU memory: after load {i['gpu_bytes_after_load'] / 2**30:.2f} GiB, peak during processing "
                     f"{i['gpu_peak_bytes_during_process'] / 2**30:.2f} GiB, after {i['gpu_bytes_after_process'] / 2**30:.2f}"
                     f" GiB; peak host RSS {i['peak_host_rss_bytes'] / 2**30:.2f} GiB")
    early = [r["info"]["early_start"] for r in reports if "early_start" in r.get("info", {})]
    if early:
        lines.append(_early_start_line(early))
    if reports and "permutation_cache" in reports[0].get("info", {}):
        c = reports[0]["info"]["permutation_cache"]
        lines.append(f"PermutationCache: {c.get('misses')} misses (distinct keys), {c.get('hits')} hits, "
                     f"{c.get('index_bytes', 0) / 2**20:.1f} MiB of indices")
    if doc.get("load_bytes") and "load" in summary["quickmoe"]:
        rate = doc["load_bytes"] / 1e9 / summary["quickmoe"]["load"][1]
        streams = [r["info"]["loader"]["seconds"] for r in reports if "seconds" in r.get("info", {}).get("loader", {})]
        stream_rate = doc["load_bytes"] / 1e9 / statistics.median(streams) if streams else None
        h2d = doc.get("pinned_h2d_gb_per_s")
        line = f"read + host->device: {rate:.1f} GB/s over the load phase" + (f" ({100 * rate / h2d:.0f}%)" if h2d else "")
        if stream_rate:
            line += f", {stream_rate:.1f} GB/s over the streaming itself" + (
                f" ({100 * stream_rate / h2d:.0f}%)" if h2d else "")
        if h2d:
            line += f"; pinned host->device measured now: {h2d:.1f} GB/s"
        lines.append(line + " (medians)")
    if "quickmoe_uncached" in summary and "process" in summary["quickmoe"]:
        cached, uncached = summary["quickmoe"]["process"][1], summary["quickmoe_uncached"]["process"][1]
        lines.append(f"weight processing, PermutationCache off / on (medians): {uncached:.3f} s / {cached:.3f} s = "
                     f"{uncached / max(cached, 1e-9):.1f}x")
    compare = doc.get("compile_compare")
    if compare and "compile" in summary.get("compiled_compare", {}) and "compile" in summary.get("compiled_cold", {}):
        deep, shallow = summary["compiled_cold"]["compile"][1], summary["compiled_compare"]["compile"][1]
        lines.append(f"compile phase with fresh caches (medians): {compare['model_layers']} layers {deep:.2f} s, "
                     f"{compare['layers']} layers {shallow:.2f} s = {deep / max(shallow, 1e-9):.2f}x")
    if "transformers" in summary:
        ratio = summary["transformers"]["total"][1] / max(summary["quickmoe"]["total"][1], 1e-9)
        lines.append(f"process start -> first token, transformers / quickmoe (medians): {ratio:.2f}x")
    return "\n".join(lines)
