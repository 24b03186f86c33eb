"""The main job on the embedded default, end to end (`make demo`): `quickmoe serve` on the tiny random model on
CPU, a completion and a streamed chat completion through its OpenAI API, its metrics, then SIGTERM (the server
drains and exits). The model's weights are random: its text is meaningless by design."""

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
        print(f"\n$ POST {base}/v1/completions")
        reply = httpx.post(f"{base}/v1/completions", json={"model": model, "prompt": "Hello from quickmoe",
                                                           "max_tokens": 16, "temperature": 0}, timeout=60)
        print(json.dumps(reply.json(), indent=2, ensure_ascii=False))
        print(f"\n$ POST {base}/v1/chat/completions (stream)")
        body = {"model": model, "messages": [{"role": "user", "content": "What is a mixture of experts?"}],
                "max_tokens": 24, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
        with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=60) as stream:
            for line in stream.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunk = json.loads(line[6:])
                    for choice in chunk["choices"]:
                        print(choice["delta"].get("content") or "", end="", flush=True)
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
