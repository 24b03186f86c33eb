"""What the serving commands import, and how long it takes: wall times of fresh processes and `python -X importtime`
attributed to top-level packages.

    python scripts/probes/import_probe.py [-n 5] [--model DIR] [--device cpu|cuda] [--json FILE]

Runs, each in -n fresh processes (median wall seconds):
- `torch`, `torch+triton`: `python -c "import torch"`, `python -c "import torch, triton.language"` (the floor);
- `import`: `python -c "import quickmoe.cli, quickmoe.llm, quickmoe.server.app"` (the issue's command);
- `help`, `generate --help`: `python -m quickmoe --help` and `python -m quickmoe generate --help`;
- `generate`: `python -m quickmoe generate DIR --prompt Hello --max-tokens 1 --device D -q`, with the report's
  `imports` phase (its --startup-json) beside the wall time;
- `serve`: `python -m quickmoe serve DIR --device D` on a free port, launch -> GET /health 200 measured from
  this process (serve_probe.py), then one completion, then SIGTERM.
Then one more run of `import`, `generate` and `serve` under `-X importtime` each: the seconds of self time per
top-level package (torch, triton, fastapi, ...; quickmoe's own modules by subpackage), which sum to the total.
DIR defaults to the embedded tiny model (built into the cache first). The figures of docs/benchmarks.md ("Cold
start II", imports) come from here. Threads that import at the same time (the early start's tokenizer) interleave
their lines, so the attribution of a command that starts them is approximate.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from serve_probe import run_once  # scripts/probes/serve_probe.py (this script's directory is on sys.path)

IMPORT_LINE = "import quickmoe.cli, quickmoe.llm, quickmoe.server.app"


def _package(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "quickmoe" and len(parts) > 1 else parts[0]


def parse_importtime(stderr: str) -> Counter:
    """Self seconds per top-level package from `-X importtime` lines ('import time: self | cumulative | name')."""
    totals: Counter = Counter()
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = line.split(":", 1)[1].split("|")
        totals[_package(name.strip())] += int(self_us) / 1e6
    return totals


def run_generate(model: str, device: str, importtime: bool = False) -> tuple[float, float | None, str]:
    """(wall s, the report's imports phase s, stderr) of one `generate --max-tokens 1` process."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "quickmoe", "generate", model,
               "--prompt", "Hello", "--max-tokens", "1", "--device", device, "-q", "--startup-json", str(report)]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        imports = json.loads(report.read_text())["phases"]["imports"]
    return wall, imports, proc.stderr


def run_serve(model: str, device: str, importtime: bool = False) -> tuple[float, str]:
    """(launch -> /health 200 s, stderr up to a completion's answer) of one `quickmoe serve` process."""
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "quickmoe", "serve", model,
           "--device", device, "-q"]
    run = run_once(cmd)
    return run["health_s"], run["stderr"]


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=5, help="fresh processes per timing (default 5)")
    ap.add_argument("--model", default=None, help="checkpoint directory (default: the embedded tiny model)")
    ap.add_argument("--device", default="cpu", help="--device of the generate and serve runs (default cpu)")
    ap.add_argument("--json", default=None, help="write the figures as JSON")
    args = ap.parse_args()
    model = args.model or subprocess.run(
        [sys.executable, "-c", "from quickmoe.checkpoint.default_model import ensure_default_model as e; print(e())"],
        capture_output=True, text=True, check=True).stdout.strip()
    py = sys.executable
    med = statistics.median
    out: dict = {"model": model, "runs": args.n, "cpus": os.cpu_count()}
    out["torch_s"] = med(wall([py, "-c", "import torch"]) for _ in range(args.n))
    out["torch_triton_s"] = med(wall([py, "-c", "import torch, triton.language"]) for _ in range(args.n))
    out["import_s"] = med(wall([py, "-c", IMPORT_LINE]) for _ in range(args.n))
    out["help_s"] = med(wall([py, "-m", "quickmoe", "--help"]) for _ in range(args.n))
    out["generate_help_s"] = med(wall([py, "-m", "quickmoe", "generate", "--help"]) for _ in range(args.n))
    gens = [run_generate(model, args.device) for _ in range(args.n)]
    out["generate_wall_s"] = med(g[0] for g in gens)
    out["generate_imports_phase_s"] = med(g[1] for g in gens)
    out["serve_health_s"] = med(run_serve(model, args.device)[0] for _ in range(args.n))
    by_command = {
        "import": parse_importtime(subprocess.run([py, "-X", "importtime", "-c", IMPORT_LINE], capture_output=True,
                                                  text=True, check=True).stderr),
        "generate": parse_importtime(run_generate(model, args.device, importtime=True)[2]),
        "serve": parse_importtime(run_serve(model, args.device, importtime=True)[1]),
    }
    out["importtime"] = {k: {p: round(s, 4) for p, s in v.most_common()} for k, v in by_command.items()}
    out["device"] = args.device
    for key in ("torch_s", "torch_triton_s", "import_s", "help_s", "generate_help_s", "generate_wall_s",
                "generate_imports_phase_s",
                "serve_health_s"):
        print(f"{key:<26} {out[key]:7.3f} s (median of {args.n})")
    for name, totals in by_command.items():
        top = ", ".join(f"{p} {s:.3f}" for p, s in totals.most_common(12))
        print(f"-X importtime {name:<9} total {sum(totals.values()):.3f} s: {top}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
