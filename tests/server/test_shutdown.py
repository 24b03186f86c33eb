"""SIGTERM on `quickmoe serve`: the listening socket stays open while draining and new requests get 503 with an
OpenAI error body; at --drain-timeout the requests still in flight end with a 503 (whole) or an error event then
`data: [DONE]` (streamed), their KV blocks are freed, the process exits 0, and no traceback reaches the log."""

from __future__ import annotations

import json
import re
import signal
import threading
import time

import httpx

from .test_serve_process import READY, _start, _wait_for

LONG = {"model": "quickmoe-tiny", "prompt": "drain me", "max_tokens": 3000, "temperature": 0, "ignore_eos": True}


def test_at_the_drain_deadline_requests_end_with_503_and_the_server_exits_0():
    proc, lines = _start("--port", "0", "--max-model-len", "4096", "--kv-cache-memory", "128MiB", "--drain-timeout", "4")
    seen: list[str] = []
    whole: dict = {}
    try:
        url = _wait_for(lines, READY, seen).group(1)
        with httpx.Client(base_url=url, timeout=120, trust_env=False) as http:

            def post_whole() -> None:
                with httpx.Client(base_url=url, timeout=120, trust_env=False) as other:
                    response = other.post("/v1/completions", json=LONG)
                    whole.update(status=response.status_code, body=response.json())

            waiter = threading.Thread(target=post_whole)
            with http.stream("POST", "/v1/completions", json={**LONG, "stream": True}) as streamed:
                events = streamed.iter_lines()
                next(e for e in events if e.startswith("data:"))  # it runs
                waiter.start()
                time.sleep(0.5)
                proc.send_signal(signal.SIGTERM)
                _wait_for(lines, re.compile(r"draining 2 request\(s\) in flight"), seen, timeout=10)
                for _ in range(3):  # the socket stays open: new requests are answered 503, with an error body
                    refused = http.post("/v1/completions", json={**LONG, "max_tokens": 2})
                    assert refused.status_code == 503
                    error = refused.json()["error"]
                    assert error["type"] == "overloaded_error" and "shutting down" in error["message"]
                    assert http.get("/health").status_code == 503
                    time.sleep(0.3)
                rest = [e[5:].strip() for e in events if e.startswith("data:")]
            waiter.join(timeout=30)
        assert rest[-1] == "[DONE]"
        error = json.loads(rest[-2])["error"]
        assert error["code"] == "server_shutting_down" and "drain" in error["message"]
        assert whole["status"] == 503 and whole["body"]["error"]["code"] == "server_shutting_down"
        assert proc.wait(timeout=30) == 0
        _wait_for(lines, re.compile(r"engine stopped; 0 sequence\(s\) hold KV blocks"), seen, timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    while (line := lines.get(timeout=5)) is not None:
        seen.append(line)
    log = "".join(seen)
    assert "Traceback" not in log and "CancelledError" not in log and " ERROR " not in log, log[-3000:]
