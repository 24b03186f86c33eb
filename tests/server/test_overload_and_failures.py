"""A full queue answers 503 instead of growing without bound; an engine step that raises fails the requests it
was running with 500 (whole or streamed) and the server goes on serving. One running request at a time
(max_num_seqs 1), a queue of one."""

from __future__ import annotations

import json
import random

import httpx
import pytest

from quickmoe.server.config import ServerConfig

from .conftest import ServerThread, wait_until

MODEL = "small"


@pytest.fixture(scope="module")
def small_server(small_llm):
    running = ServerThread(small_llm, ServerConfig(port=0, max_waiting=1, served_model_name=MODEL))
    yield running
    running.stop()


@pytest.fixture()
def http(small_server):
    with httpx.Client(base_url=small_server.url, timeout=60, trust_env=False) as client:
        yield client


def _first_data(lines) -> dict:
    """The next data event of an SSE line iterator (kept open by the caller: a loop over `iter_lines()` that
    ends early closes the connection, which aborts the request)."""
    for line in lines:
        if line.startswith("data:"):
            return json.loads(line[5:])
    raise AssertionError("no data line")


def test_more_waiting_requests_than_the_queue_get_503(http, small_server):
    long = {"model": MODEL, "prompt": "running", "max_tokens": 40, "stream": True, "temperature": 0,
            "ignore_eos": True}
    with http.stream("POST", "/v1/completions", json=long) as running:
        running_lines = running.iter_lines()
        _first_data(running_lines)  # it runs (max_num_seqs 1)
        with http.stream("POST", "/v1/completions", json={**long, "prompt": "waiting"}) as waiting:
            assert waiting.status_code == 200  # accepted: the queue holds one
            for body in ({"model": MODEL, "prompt": "one too many", "max_tokens": 2},
                         {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": 2}):
                path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
                refused = http.post(path, json=body)
                assert refused.status_code == 503
                assert refused.headers["retry-after"] == "1"
                error = refused.json()["error"]
                assert (error["type"], error["code"], error["param"]) == ("overloaded_error", "overloaded", None)
                assert "waiting" in error["message"]
            assert http.get("/health").status_code == 200  # overloaded is not unhealthy
            assert small_server.serving.engine.num_in_flight == 2  # the running and the waiting one
    blocks = small_server.llm.engine.blocks
    assert wait_until(lambda: blocks.num_sequences == 0, timeout=5.0)
    ok = http.post("/v1/completions", json={"model": MODEL, "prompt": "after", "max_tokens": 2})
    assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 2


class PoisonedRunner:
    """Raises in the model step of any batch that holds the poison token, as a bug or a device error would."""

    def __init__(self, execute, poison: int) -> None:
        self.execute, self.poison, self.raised = execute, poison, 0

    def __call__(self, token_ids, *args, **kwargs):
        if any(self.poison in ids for ids in token_ids):
            self.raised += 1
            raise RuntimeError("injected step failure")
        return self.execute(token_ids, *args, **kwargs)


def test_a_failing_engine_step_fails_its_requests_with_500_and_the_server_goes_on(http, small_server, monkeypatch):
    runner = small_server.llm.engine.runner
    poison = random.Random().randrange(1000, 100000)
    poisoned = PoisonedRunner(runner.execute, poison)
    monkeypatch.setattr(runner, "execute", poisoned)
    whole = http.post("/v1/completions", json={"model": MODEL, "prompt": [poison, 5, 6], "max_tokens": 4})
    assert whole.status_code == 500
    error = whole.json()["error"]
    assert (error["type"], error["code"]) == ("server_error", "engine_error")
    assert "injected step failure" in error["message"]
    with http.stream("POST", "/v1/completions", json={"model": MODEL, "prompt": [7, poison], "max_tokens": 4,
                                                       "stream": True}) as streamed:
        assert streamed.status_code == 200  # the failure comes after the headers: as an error event
        events = [line[5:].strip() for line in streamed.iter_lines() if line.startswith("data:")]
    assert events[-1] == "[DONE]" and json.loads(events[-2])["error"]["code"] == "engine_error"
    assert poisoned.raised == 2
    blocks = small_server.llm.engine.blocks
    assert wait_until(lambda: blocks.num_sequences == 0, timeout=5.0)
    ok = http.post("/v1/completions", json={"model": MODEL, "prompt": [8, 9], "max_tokens": 3})
    assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 3
    assert http.get("/health").status_code == 200
