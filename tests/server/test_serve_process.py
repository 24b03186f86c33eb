"""`quickmoe serve` as its own process (no DIR: the embedded tiny model on CPU): one ready line with the URL,
SIGTERM lets the request in flight finish, refuses new ones, and exits 0; a taken port fails at once; the HTTP
frontend (a process of its own by default) answers what the engine computes, and either process dying ends the
other. And `quickmoe bench serve` against a server prints its table and writes JSON."""

from __future__ import annotations

import json
import os
import queue
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from quickmoe.cli import main

from .conftest import API_KEY, wait_until

READY = re.compile(r"quickmoe is serving 'quickmoe-tiny' at (http://127\.0\.0\.1:\d+)")


def _start(*args: str, python_flags: tuple[str, ...] = ()) -> tuple[subprocess.Popen, queue.Queue]:
    proc = subprocess.Popen([sys.executable, *python_flags, "-m", "quickmoe", "serve", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()

    def drain() -> None:
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=drain, daemon=True).start()
    return proc, lines


def _wait_for(lines: queue.Queue, pattern: re.Pattern, seen: list[str], timeout: float = 120) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        match = pattern.search(line)
        if match:
            return match
    raise AssertionError("not found: " + pattern.pattern + "\n" + "".join(seen[-30:]))


def test_sigterm_drains_the_request_in_flight_then_exits_0():
    # (long enough a request that it is still running when the 503 is asked for: the trained embedded model
    # decodes 60 tokens on CPU in well under the drain's first 0.3 s when the machine is idle)
    proc, lines = _start("--port", "0", "--max-model-len", "512", "--kv-cache-memory", "128MiB")
    seen: list[str] = []
    try:
        url = _wait_for(lines, READY, seen).group(1)
        with httpx.Client(base_url=url, timeout=60, trust_env=False) as http:
            assert http.get("/health").json() == {"status": "ok"}
            body = {"model": "quickmoe-tiny", "prompt": "drain me", "max_tokens": 400, "temperature": 0,
                    "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
            with http.stream("POST", "/v1/completions", json=body) as response:
                events = response.iter_lines()
                first = next(e for e in events if e.startswith("data:"))
                proc.send_signal(signal.SIGTERM)
                _wait_for(lines, re.compile(r"draining 1 request\(s\) in flight"), seen, timeout=10)
                time.sleep(0.3)
                with httpx.Client(base_url=url, timeout=5, trust_env=False) as other:  # no new requests meanwhile
                    assert other.post("/v1/completions", json={**body, "stream": False}).status_code == 503
                rest = [e[5:].strip() for e in events if e.startswith("data:")]
        chunks = [json.loads(first[5:])] + [json.loads(e) for e in rest[:-1]]
        assert rest[-1] == "[DONE]"
        assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"
        assert chunks[-1]["usage"]["completion_tokens"] == 400  # every token, after the SIGTERM too
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_imports_nothing_it_does_not_serve_with():
    """A fresh `quickmoe serve` under `-X importtime` answering a completion: the server's stack, but nothing from
    bench/, transformers, hypothesis, the OpenAI client, Dynamo or Inductor."""
    from tests.unit.test_serving_imports import NOT_FOR_SERVING, loaded

    proc, lines = _start("--port", "0", "--max-model-len", "128", "--kv-cache-memory", "128MiB",
                         python_flags=("-X", "importtime"))
    seen: list[str] = []
    try:
        url = _wait_for(lines, READY, seen).group(1)
        with httpx.Client(base_url=url, timeout=60, trust_env=False) as http:
            body = {"model": "quickmoe-tiny", "prompt": "Hello", "max_tokens": 2, "temperature": 0}
            assert http.post("/v1/completions", json=body).status_code == 200
    finally:  # however the checks went, the server drains and exits
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    while (line := lines.get(timeout=10)) is not None:
        seen.append(line)
    modules = {line.rsplit("|", 1)[1].strip() for line in seen if line.startswith("import time:")}
    assert {"fastapi", "uvicorn", "quickmoe.server.app", "torch"} <= modules
    assert loaded(modules, NOT_FOR_SERVING) == []


def test_both_processes_freeze_their_heaps():
    """With the defaults (QUICKMOE_SERVING_GC=frozen) the HTTP frontend collects and freezes its heap while the
    engine loads, before the server is ready, and the engine once its idle work is done; requests are then served.
    (Each process's full collector passes would otherwise scan its start-up's objects: ~56,000 in the frontend,
    30-54 ms a pass on the development machine.)"""
    proc, lines = _start("--port", "0", "--max-model-len", "128", "--kv-cache-memory", "128MiB")
    seen: list[str] = []
    frontend = re.compile(r"heap frozen in the frontend, while the engine loads: (\d+) objects")
    try:
        frozen = int(_wait_for(lines, frontend, seen).group(1))
        url = _wait_for(lines, READY, seen).group(1)  # after the frontend's freeze
        assert frozen > 10_000  # the server's imports (fastapi, pydantic, uvicorn) and the tokenizer's
        _wait_for(lines, re.compile(r"heap frozen after the idle work"), seen)
        with httpx.Client(base_url=url, timeout=60, trust_env=False) as http:
            body = {"model": "quickmoe-tiny", "prompt": "Hello", "max_tokens": 4, "temperature": 0}
            assert http.post("/v1/completions", json=body).json()["usage"]["completion_tokens"] == 4
    finally:
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0


def _frontends(pid: int) -> list[int]:
    """The HTTP frontend process of the server `pid` (its spawned child in a process group of its own)."""
    from tests.distributed.test_processes import _children

    return _children(pid, frontends=True)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("frontend", ["on", "off"])
def test_the_server_answers_what_the_engine_computes(frontend):
    """Greedy completions (whole and streamed) from `quickmoe serve` equal LLM.generate on the same model, with the
    HTTP server in a process of its own (the default) or in the engine's."""
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM

    prompts = ["def main(", "import os\nimport", "class Point:"]
    expected = [o.text for o in LLM(None, max_model_len=512, kv_cache_memory=128 * 2**20).generate(
        prompts, SamplingParams(max_tokens=24, temperature=0))]
    proc, lines = _start("--port", "0", "--max-model-len", "512", "--kv-cache-memory", "128MiB",
                         "--frontend-process", frontend)
    seen: list[str] = []
    try:
        url = _wait_for(lines, READY, seen).group(1)
        assert len(_frontends(proc.pid)) == (1 if frontend == "on" else 0)
        with httpx.Client(base_url=url, timeout=60, trust_env=False) as http:
            body = {"model": "quickmoe-tiny", "prompt": prompts, "max_tokens": 24, "temperature": 0}
            whole = http.post("/v1/completions", json=body).json()["choices"]
            assert [c["text"] for c in sorted(whole, key=lambda c: c["index"])] == expected
            streamed = {}
            with http.stream("POST", "/v1/completions", json={**body, "stream": True}) as response:
                for line in response.iter_lines():
                    if line.startswith("data:") and line[5:].strip() != "[DONE]":
                        for choice in json.loads(line[5:])["choices"]:
                            streamed[choice["index"]] = streamed.get(choice["index"], "") + choice["text"]
            assert [streamed[i] for i in range(len(prompts))] == expected
            bad = http.post("/v1/completions", json={**body, "prompt": [[1, 10**9]]})
            assert bad.status_code == 400 and "vocabulary" in bad.json()["error"]["message"]
    finally:
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0


@pytest.mark.parametrize("victim", ["frontend", "engine"])
def test_either_process_dying_ends_the_other(victim):
    proc, lines = _start("--port", "0", "--max-model-len", "256", "--kv-cache-memory", "64MiB")
    seen: list[str] = []
    try:
        _wait_for(lines, READY, seen)
        (frontend,) = _frontends(proc.pid)
        if victim == "frontend":
            os.kill(frontend, signal.SIGKILL)
            assert proc.wait(timeout=30) == 1  # the engine aborted its requests and stopped
            _wait_for(lines, re.compile(r"the HTTP frontend exited"), seen, timeout=10)
        else:
            proc.kill()
            proc.wait()
            deadline = time.monotonic() + 30
            while _alive(frontend) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not _alive(frontend), "the frontend outlived its engine"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_taken_port_fails_before_the_model_loads():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        t0 = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "quickmoe", "serve", "--port", str(port)],
                                capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "loaded" not in result.stderr and time.monotonic() - t0 < 30


def test_bench_serve_prints_its_table_and_writes_json(server, tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["bench", "serve", "--base-url", server.url + "/v1", "--api-key", API_KEY, "--concurrency", "1,3",
                 "--num-prompts", "3", "--input-len", "16", "--output-len", "5", "--result-json", str(out),
                 "-q"]) == 0
    printed = capsys.readouterr().out
    for label in ("Successful requests:", "Benchmark duration (s):", "Total input tokens:", "Total generated tokens:",
                  "Request throughput (req/s):", "Output token throughput (tok/s):", "Total token throughput (tok/s):",
                  "Mean TTFT (ms):", "Median TTFT (ms):", "P99 TTFT (ms):", "Mean ITL (ms):", "Median ITL (ms):",
                  "P95 ITL (ms):", "P99 ITL (ms):", "Max ITL (ms):", "Mean E2E latency (ms):",
                  "Median E2E latency (ms):"):
        assert printed.count(label) == 2, label
    report = json.loads(out.read_text())
    assert report["model"] == "tiny"
    assert [r["concurrency"] for r in report["results"]] == [1, 3]
    for level in report["results"]:
        assert (level["successful_requests"], level["failed_requests"]) == (3, 0)
        assert (level["total_input_tokens"], level["total_output_tokens"]) == (48, 15)
        assert 0 < level["median_ttft_ms"] <= level["mean_e2e_ms"] * 3 and level["max_itl_ms"] >= level["p99_itl_ms"]
        # the server's view of the level (/metrics read before and after): its steps computed the 48 prompt tokens
        # and 4 more a request (the 1st output token comes with the prompt's step; a step may run one token past),
        # decode steps (or mixed ones, at concurrency 3) of at most `concurrency` rows
        steps = level["server_steps"]
        kinds = steps["by_kind"]
        assert 48 + 12 <= sum(k["tokens"] for k in kinds.values()) <= 48 + 15, kinds
        assert kinds["decode"]["tokens_per_step"] <= level["concurrency"] and kinds["decode"]["steps"] >= 4
        assert all(k["device_ms_per_step"] > 0 for k in kinds.values())
        assert 0 <= steps["device_idle_fraction"] < 1 and steps["host_ms_per_step"] > 0
        assert 0 < level["client_cpu_fraction"] < 4
    assert printed.count("server steps (mean): ") == 2 and printed.count("this client used") == 2


def test_the_readme_demo_serves_and_queries_the_embedded_model(tmp_path):
    """`make demo` (scripts/demo.py): quickmoe serve on the embedded default, a greedy and a streamed completion of
    Python, the metrics, SIGTERM; it exits 0 and shows the replies (the trained model writes Python)."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "demo.py"
    env = dict(os.environ, QUICKMOE_CACHE_DIR=os.environ.get("QUICKMOE_CACHE_DIR", str(tmp_path / "cache")))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert '"object": "text_completion"' in run.stdout and "def fibonacci(n):" in run.stdout
    assert "return" in run.stdout.split("def fibonacci(n):", 1)[1]
    assert "[usage {'prompt_tokens':" in run.stdout and "quickmoe:request_success_total" in run.stdout


def test_bench_serve_mixed_lengths_disconnects_and_a_duration(server, tmp_path, capsys):
    """--input-len-range / --output-len-range give mixed requests within the ranges, --disconnect-fraction cuts that
    share of them on the client (counted apart; the server frees their blocks), --duration runs each level for a
    time instead of a count."""
    out = tmp_path / "soak.json"
    t0 = time.monotonic()
    assert main(["bench", "serve", "--base-url", server.url, "--api-key", API_KEY, "--concurrency", "4",
                 "--input-len-range", "5,40", "--output-len-range", "2,12", "--disconnect-fraction", "0.3",
                 "--duration", "4", "--seed", "3", "--result-json", str(out), "-q"]) == 0
    elapsed = time.monotonic() - t0
    assert "Disconnected by the client:" in capsys.readouterr().out
    level = json.loads(out.read_text())["results"][0]
    done, left = level["successful_requests"], level["disconnected_requests"]
    assert level["failed_requests"] == 0 and level["rejected_requests"] == 0 and done >= 8 and left >= 2
    assert 5 * done <= level["total_input_tokens"] <= 40 * done and 2 * done <= level["total_output_tokens"] <= 12 * done
    assert 0.1 < left / (done + left) < 0.6 and 4 <= level["duration_s"] < elapsed
    assert wait_until(lambda: server.llm.engine.blocks.num_sequences == 0, timeout=10)


def test_bench_serve_with_a_shared_prefix_hits_the_prefix_cache(server, tmp_path, http):
    """--shared-prefix-len: every prompt starts with the same ids, so all but the first request (the warm-up) take
    the prefix's full blocks from the cache."""
    from .conftest import metric_values

    def hits() -> float:
        return metric_values(http.get("/metrics").text, "quickmoe:prefix_cache_hits_total")['{model_name="tiny"}']

    before = hits()
    out = tmp_path / "bench.json"
    assert main(["bench", "serve", "--base-url", server.url, "--api-key", API_KEY, "--concurrency", "2",
                 "--num-prompts", "4", "--input-len", "8", "--shared-prefix-len", "64", "--output-len", "2",
                 "--seed", str(random.randrange(10**6)), "--result-json", str(out), "-q"]) == 0
    level = json.loads(out.read_text())["results"][0]
    assert level["total_input_tokens"] == 4 * (64 + 8)
    assert hits() - before >= 4 * 64  # the 4 measured requests (after the warm-up) each hit the 64 shared tokens
