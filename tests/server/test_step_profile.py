"""The server's step profile (POST /profile_steps, --enable-step-profile): the engine loop traces exactly the steps
asked for, or those that ran before its work ran out; one profile at a time; a late answer never answers a later
request; a device without CUDA is refused with its reason. The loop's part runs over the scripted engine (a
counting stand-in for the CUDA trace, which tests/models/test_step_profile_gpu.py runs for real), on a thread and
behind the engine process's pipe; the HTTP part over the embedded model on CPU, as is `bench serve
--op-family-steps`."""

from __future__ import annotations

import asyncio
import random
import time
from types import SimpleNamespace

import httpx
import pytest

from quickmoe.bench.serve import ServeBenchOptions, run_serve_bench
from quickmoe.checkpoint.default_model import ensure_tiny_random_model
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.llm import LLM
from quickmoe.server import engine_core
from quickmoe.server.engine_errors import EngineStepFailed, ProfileBusy
from quickmoe.server.config import ServerConfig

from .conftest import API_KEY, MODEL, ServerThread
from .scripted import ScriptedEngine, collect


class CountingProfile:
    """Stands in for the CUDA trace: what the loop told it (`steps`) beside the engine steps that really ran
    between its start and its finish."""

    def __init__(self, engine) -> None:
        self.engine, self.first = engine, engine.steps
        self.steps = 0

    def finish(self) -> dict:
        return {"steps": self.steps, "engine_steps": self.engine.steps - self.first}


@pytest.fixture()
def counting(monkeypatch):
    monkeypatch.setattr(engine_core, "EngineStepProfile", CountingProfile)


def test_a_profile_covers_the_steps_asked_for_or_those_left(backend, counting):
    engine = ScriptedEngine()
    want = random.randrange(3, 9)

    async def main():
        async_engine = backend(engine, max_waiting=8)
        async_engine.start()
        streams = [async_engine.add_request(f"r{i}", [1, 2], SamplingParams(max_tokens=60)) for i in range(3)]
        await streams[0].__anext__()
        doc = await async_engine.profile_steps(want, timeout_s=30)
        assert doc == {"steps": want, "engine_steps": want}
        await asyncio.gather(*(collect(s) for s in streams))
        short = [async_engine.add_request(f"s{i}", [1], SamplingParams(max_tokens=30)) for i in range(2)]
        await short[0].__anext__()  # under 30 steps of work are left
        left = await async_engine.profile_steps(64, timeout_s=30)
        await asyncio.gather(*(collect(s) for s in short))
        await async_engine.shutdown()
        return left

    left = asyncio.run(main())
    assert 1 <= left["steps"] < 64 and left["steps"] == left["engine_steps"]  # the work ran out first


def test_one_profile_at_a_time_and_a_late_answer_answers_nobody(backend, counting):
    engine = ScriptedEngine()

    async def main():
        async_engine = backend(engine, max_waiting=8)
        async_engine.start()
        waiting = asyncio.ensure_future(async_engine.profile_steps(2, timeout_s=30))  # idle: waits for steps
        await asyncio.sleep(0.05)
        with pytest.raises(ProfileBusy):
            await async_engine.profile_steps(3, timeout_s=30)
        waiting.cancel()  # the client went away; its profile stays queued in the loop
        with pytest.raises(asyncio.CancelledError):
            await waiting
        with pytest.raises(asyncio.TimeoutError):
            await async_engine.profile_steps(2, timeout_s=0.1)  # still idle; this one too stays queued
        stream = async_engine.add_request("a", [1], SamplingParams(max_tokens=80))
        await stream.__anext__()
        doc = await async_engine.profile_steps(7, timeout_s=30)  # answered after the two stale ones (2 steps each)
        await collect(stream)
        await async_engine.shutdown()
        return doc

    assert asyncio.run(main()) == {"steps": 7, "engine_steps": 7}


def test_an_engine_without_cuda_answers_why(backend):
    engine = ScriptedEngine()
    engine.runner = SimpleNamespace(device=SimpleNamespace(type="cpu"))

    async def main():
        async_engine = backend(engine, max_waiting=8)
        async_engine.start()
        stream = async_engine.add_request("a", [1], SamplingParams(max_tokens=40))
        await stream.__anext__()
        doc = await async_engine.profile_steps(4, timeout_s=30)
        await collect(stream)
        await async_engine.shutdown()
        return doc

    assert "CUDA" in asyncio.run(main())["error"]


def test_a_loop_that_dies_answers_its_profile_and_a_profiler_failure_does_not_end_the_loop(backend, monkeypatch):
    """The running profile is answered with the reason when the loop dies (not left to time out); a profiler that
    fails to start is reported and the requests go on."""
    engine = ScriptedEngine()

    class BrokenProfile:
        def __init__(self, engine) -> None:
            raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    async def main():
        async_engine = backend(engine, max_waiting=8)
        async_engine.start()
        monkeypatch.setattr(engine_core, "EngineStepProfile", BrokenProfile)
        stream = async_engine.add_request("a", [1], SamplingParams(max_tokens=300))
        await stream.__anext__()
        broken = await async_engine.profile_steps(4, timeout_s=30)
        monkeypatch.setattr(engine_core, "EngineStepProfile", CountingProfile)
        running = asyncio.ensure_future(async_engine.profile_steps(64, timeout_s=30))
        await asyncio.sleep(0.02)  # the profile runs (300 steps of 2 ms are left)
        engine.fail = SystemExit("the loop itself breaks")
        died = await running
        with pytest.raises(EngineStepFailed):
            await collect(stream)
        await async_engine.shutdown()
        return broken, died

    broken, died = asyncio.run(main())
    assert "CUPTI_ERROR_NOT_INITIALIZED" in broken["error"] and died == {"error": "the engine loop died"}


@pytest.fixture(scope="module")
def profiled_server():
    llm = LLM(ensure_tiny_random_model(), device="cpu", max_model_len=256, kv_cache_memory=16 << 20)
    running = ServerThread(llm, ServerConfig(port=0, api_key=API_KEY, served_model_name=MODEL,
                                             enable_step_profile=True))
    yield running
    running.stop()


def _post(url: str, body) -> httpx.Response:
    return httpx.post(url + "/profile_steps", json=body, headers={"Authorization": f"Bearer {API_KEY}"},
                      timeout=60, trust_env=False)


def test_the_route_is_off_unless_enabled_and_checks_its_fields(server, profiled_server):
    off = _post(server.url, {"steps": 4})
    assert off.status_code == 404 and "--enable-step-profile" in off.json()["error"]["message"]
    assert httpx.post(profiled_server.url + "/profile_steps", json={}, trust_env=False).status_code == 401
    for body, param in (({"steps": 0}, "steps"), ({"steps": 65}, "steps"), ({"steps": "8"}, "steps"),
                        ({"timeout_s": -1}, "timeout_s"), ({"stepz": 3}, "stepz")):
        bad = _post(profiled_server.url, body)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == param, (body, bad.text)
    on_cpu = _post(profiled_server.url, {"steps": 2, "timeout_s": 0.5})  # no step runs: the wait times out
    assert on_cpu.status_code == 504 and on_cpu.json()["error"]["param"] == "timeout_s"


def test_bench_serve_reports_the_profile_it_could_not_get(server, profiled_server, capsys):
    """On a CPU server the level's line says why (the engine's device); on a server without the option, the 404
    once, and no more asking."""
    for running, reason in ((profiled_server, "HTTP 400"), (server, "HTTP 404")):
        report = run_serve_bench(ServeBenchOptions(base_url=running.url, concurrency=(2, 1), num_prompts=3,
                                                   input_len=8, output_len=6, api_key=API_KEY, warmup=False,
                                                   op_family_steps=3))
        first, second = (level.get("server_op_families") for level in report["results"])
        assert first["error"].startswith(reason)
        if reason == "HTTP 400":
            assert "cpu" in first["error"] and second["error"].startswith(reason)
        else:
            assert second is None
        assert f"server step profile: none ({reason}" in capsys.readouterr().out


def test_a_level_with_no_request_ending_while_others_run_asks_nothing(profiled_server):
    """One request a level: when it ends the server is idle, where a profile would wait for steps until its
    timeout; the level asks nothing and says why."""
    start = time.monotonic()
    report = run_serve_bench(ServeBenchOptions(base_url=profiled_server.url, concurrency=(1,), num_prompts=1,
                                               input_len=8, output_len=4, api_key=API_KEY, warmup=False,
                                               op_family_steps=2))
    assert "no request of the level finished" in report["results"][0]["server_op_families"]["error"]
    assert time.monotonic() - start < 20
