"""The worst inter-token latency of a streamed request while a long prompt is prefilled, and how long a
1-token request sent meanwhile waits (head-of-line blocking), against a fresh `quickmoe serve` process.

    python scripts/probes/itl_long_prefill.py --prompt-len 32768 [-- SERVE FLAGS...]

Starts `quickmoe serve` (no DIR: the embedded tiny model on CPU) on a free port; streams one greedy request of
--stream-tokens tokens; after --lead tokens, sends one prompt of --prompt-len random token ids (1 output token)
and, right after, a 1-token request; prints the stream's worst gap between tokens while the long prompt was being
prefilled (from its send to its answer), the median gap before it, and the 1-token request's latency; stops the
server with SIGTERM. The figures of docs/benchmarks.md come from here.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

import httpx

READY = re.compile(r"quickmoe is serving '[^']+' at (http://\S+) ")


def start_server(extra: list[str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "quickmoe", "serve", "--port", "0", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        match = READY.search(line)
        if match:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # keep draining
            return proc, match.group(1)
    raise SystemExit(f"the server did not start (exit status {proc.wait()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompt-len", type=int, default=32768)
    parser.add_argument("--stream-tokens", type=int, default=4000)
    parser.add_argument("--lead", type=int, default=20, help="streamed tokens before the long prompt is sent")
    parser.add_argument("serve_args", nargs="*", help="flags for quickmoe serve (after --)")
    args = parser.parse_args()
    proc, url = start_server(args.serve_args)
    model = httpx.get(url + "/v1/models", trust_env=False).json()["data"][0]["id"]
    times: list[float] = []
    window: dict[str, float] = {}

    def long_and_short() -> None:
        ids = [random.Random(0).randrange(1000, 30000) for _ in range(args.prompt_len)]
        with httpx.Client(base_url=url, timeout=3600, trust_env=False) as client:
            window["sent"] = time.monotonic()
            short = threading.Thread(target=lambda: window.update(short=_one_token(client, model)))
            long = threading.Thread(target=lambda: client.post("/v1/completions", json={
                "model": model, "prompt": ids, "max_tokens": 1}).raise_for_status())
            long.start()
            time.sleep(0.2)  # the long prompt first
            short.start()
            long.join()
            window["done"] = time.monotonic()
            short.join()

    try:
        body = {"model": model, "prompt": "stream", "max_tokens": args.stream_tokens, "temperature": 0,
                "ignore_eos": True, "stream": True}
        sender = threading.Thread(target=long_and_short)
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=3600, trust_env=False) as response:
            for line in response.iter_lines():
                if not line.startswith("data:") or line.strip() == "data: [DONE]":
                    continue
                times.append(time.monotonic())
                if len(times) == args.lead:
                    sender.start()
                if "done" in window and times[-1] > window["done"] + 1:
                    break
        sender.join()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    gaps = [(b - a, b) for a, b in zip(times, times[1:])]
    during = [g for g, t in gaps if window["sent"] <= t <= window["done"] + 1e-3]
    before = [g for g, t in gaps if t < window["sent"]]
    result = {"prompt_len": args.prompt_len, "serve_args": args.serve_args,
              "prefill_s": round(window["done"] - window["sent"], 2),
              "max_itl_during_prefill_ms": round(1000 * max(during), 1) if during else None,
              "tokens_during_prefill": len(during),
              "median_itl_before_ms": round(1000 * statistics.median(before), 1) if before else None,
              "one_token_request_s": round(window["short"], 2)}
    print(json.dumps(result))


def _one_token(client: httpx.Client, model: str) -> float:
    t0 = time.monotonic()
    client.post("/v1/completions", json={"model": model, "prompt": "hi", "max_tokens": 1}).raise_for_status()
    return time.monotonic() - t0


if __name__ == "__main__":
    main()
