"""Launch -> GET /health 200 of `quickmoe serve`, measured from outside the process, and the first request's time to
first token right after, in fresh server processes.

    python scripts/probes/serve_probe.py [-n 3] [--json FILE] -- SERVE ARGS...   (e.g. -- /tmp/gpt-oss-20b)

Each run starts `python -m quickmoe serve SERVE ARGS --port P` (a free port), polls /health every 10 ms from this
process (the clock starts just before the process is spawned), then sends one streamed /v1/completions request
(a short prompt, 8 tokens, greedy) and times its first SSE chunk and its end, then stops the server with SIGTERM
(it must exit 0). Prints each run and the medians. Standard library only (the device machine lacks no part).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return r.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def first_request(base: str, model: str, max_tokens: int = 8) -> tuple[float, float]:
    """(seconds to the first streamed chunk, seconds to the end) of one greedy completion."""
    body = json.dumps({"model": model, "prompt": "Hello, my name is", "max_tokens": max_tokens, "temperature": 0,
                       "stream": True}).encode()
    req = urllib.request.Request(f"{base}/v1/completions", data=body, headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    first = None
    with urllib.request.urlopen(req, timeout=600) as resp:
        for line in resp:
            if line.startswith(b"data: ") and first is None:
                first = time.perf_counter() - t0
    return (first if first is not None else float("nan")), time.perf_counter() - t0


def run_once(cmd: list[str], timeout_s: float = 600.0, *, request: bool = True) -> dict:
    """One fresh server: launch -> /health 200 seconds, the first request's timings, its stderr (a log)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([*cmd, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=err, text=True)
        try:
            while not _get_ok(f"{base}/health"):
                if proc.poll() is not None:
                    err.seek(0)
                    raise SystemExit(f"the server exited with {proc.returncode}:\n{err.read()[-4000:]}")
                if time.perf_counter() - t0 > timeout_s:
                    raise SystemExit(f"no /health 200 within {timeout_s} s")
                time.sleep(0.01)
            out = {"health_s": time.perf_counter() - t0}
            if request:
                with urllib.request.urlopen(f"{base}/v1/models", timeout=10) as r:
                    model = json.loads(r.read())["data"][0]["id"]
                out["first_chunk_s"], out["request_s"] = first_request(base, model)
        finally:
            proc.send_signal(signal.SIGTERM)
            out_code = proc.wait(timeout=120)
        err.seek(0)
        out["exit_code"], out["stderr"] = out_code, err.read()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=3, help="fresh server processes (default 3)")
    ap.add_argument("--json", default=None, help="write every run's figures as JSON")
    ap.add_argument("serve_args", nargs=argparse.REMAINDER, help="-- then the arguments of `quickmoe serve`")
    args = ap.parse_args()
    serve_args = args.serve_args[1:] if args.serve_args[:1] == ["--"] else args.serve_args
    cmd = [sys.executable, "-m", "quickmoe", "serve", *serve_args]
    runs = []
    for i in range(args.n):
        run = run_once(cmd)
        runs.append({k: v for k, v in run.items() if k != "stderr"})
        print(f"run {i + 1}: /health 200 after {run['health_s']:.3f} s; first request: first chunk "
              f"{run['first_chunk_s']:.3f} s, done {run['request_s']:.3f} s; exit {run['exit_code']}", flush=True)
        if i == 0:
            kept = [line for line in run["stderr"].splitlines() if "KV cache" in line or "captured" in line
                    or "startup report" in line or line.startswith("  ")]
            print("\n".join(kept[-40:]))
    med = {k: statistics.median(r[k] for r in runs) for k in ("health_s", "first_chunk_s", "request_s")}
    print(f"medians of {args.n}: /health 200 {med['health_s']:.3f} s after launch; first chunk "
          f"{med['first_chunk_s']:.3f} s after /health; exit codes {[r['exit_code'] for r in runs]}")
    if args.json:
        Path(args.json).write_text(json.dumps({"command": cmd, "runs": runs, "medians": med}, indent=2) + "\n")


if __name__ == "__main__":
    main()
