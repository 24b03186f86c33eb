"""The main job on the embedded default, end to end (`make demo`): `quickmoe serve` on the embedded model on CPU (a
small gpt-oss trained on the Python standard library's source: it completes Python code), a greedy completion and a
streamed one through its OpenAI API, its metrics, then SIGTERM (the server drains and exits)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "quickmoe", "serve", "--port", str(port), "--device", "cpu"])
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                print("the server did not become ready", file=sys.stderr)
                return 1
            time.sleep(0.3)
        model = httpx.get(f"{base}/v1/models").json()["data"][0]["id"]
        prompt = "def fibonacci(n):"
        print(f"\n$ POST {base}/v1/completions  (greedy, prompt {prompt!r})")
        reply = httpx.post(f"{base}/v1/completions", json={"model": model, "prompt": prompt, "max_tokens": 48,
                                                           "temperature": 0}, timeout=60).json()
        print(json.dumps({k: v for k, v in reply.items() if k != "choices"}, ensure_ascii=False))
        print(prompt + reply["choices"][0]["text"])
        prompt = "import os\n\n\ndef list_python_files(directory):"
        print(f"\n$ POST {base}/v1/completions  (stream, temperature 0.7, seed 1, prompt {prompt!r})")
        body = {"model": model, "prompt": prompt, "max_tokens": 64, "temperature": 0.7, "seed": 1, "stream": True,
                "stream_options": {"include_usage": True}}
        print(prompt, end="")
        with httpx.stream("POST", f"{base}/v1/completions", json=body, timeout=60) as stream:
            for line in stream.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunk = json.loads(line[6:])
                    for choice in chunk["choices"]:
                        print(choice.get("text") or "", end="", flush=True)
                    if chunk.get("usage"):
                        print(f"\n[usage {chunk['usage']}]")
        metrics = httpx.get(f"{base}/metrics").text.splitlines()
        wanted = ("quickmoe:request_success_total", "quickmoe:generation_tokens_total", "quickmoe:kv_cache_usage_perc",
                  "quickmoe:time_to_first_token_seconds_count")
        print("\n$ GET /metrics (excerpt)\n" + "\n".join(m for m in metrics if m.startswith(wanted)))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
