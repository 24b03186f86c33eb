"""Admission counts as waiting only what the engine could not admit: with --max-num-seqs 4 --max-waiting 8, a
burst of 9 (or 12) simultaneous requests to an idle server is accepted, and only the 13th is refused (503)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from quickmoe.llm import LLM
from quickmoe.server.config import ServerConfig

from .conftest import ServerThread, wait_until

MODEL = "admission"


@pytest.fixture(scope="module")
def server():
    llm = LLM(None, device="cpu", max_model_len=256, max_num_seqs=4, kv_cache_memory=32 << 20)
    running = ServerThread(llm, ServerConfig(port=0, max_waiting=8, served_model_name=MODEL))
    yield running
    running.stop()


def _body(i: int, max_tokens: int, stream: bool = False) -> dict:
    return {"model": MODEL, "prompt": f"burst {i}", "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": stream}


async def _burst(url: str, n: int, max_tokens: int) -> list[int]:
    async with httpx.AsyncClient(base_url=url, timeout=120, trust_env=False) as client:
        responses = await asyncio.gather(*(client.post("/v1/completions", json=_body(i, max_tokens))
                                           for i in range(n)))
    return [r.status_code for r in responses]


def test_a_burst_of_max_num_seqs_plus_max_waiting_to_an_idle_server_is_accepted(server):
    for n in (9, 12, 9):
        assert asyncio.run(_burst(server.url, n, max_tokens=4)) == [200] * n
        assert wait_until(lambda: server.llm.engine.blocks.num_sequences == 0, timeout=10)


def test_the_request_beyond_running_and_waiting_gets_503(server):
    async def scenario() -> tuple[list[int], int]:
        async with httpx.AsyncClient(base_url=server.url, timeout=120, trust_env=False) as client:
            streams = [client.stream("POST", "/v1/completions", json=_body(i, 200, stream=True)) for i in range(12)]
            responses = await asyncio.gather(*(s.__aenter__() for s in streams))
            try:
                refused = await client.post("/v1/completions", json=_body(99, 2))
                return [r.status_code for r in responses], refused.status_code
            finally:
                for s in streams:
                    await s.__aexit__(None, None, None)

    accepted, refused = asyncio.run(scenario())
    assert accepted == [200] * 12 and refused == 503
    assert wait_until(lambda: server.llm.engine.blocks.num_sequences == 0, timeout=10)
