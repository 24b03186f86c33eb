"""Servers for the HTTP tests: uvicorn in a background thread over the embedded tiny model (real o200k vocabulary,
random weights) on CPU, on a free port of 127.0.0.1. An Engine serves one server at a time, so each LLM below
backs one server at a time (module-scoped servers run one after the other). `backend`: an AsyncEngine over a given
engine (tests/server/scripted.py's), its step loop on a thread or behind the engine process's pipe."""

from __future__ import annotations

import multiprocessing
import re
import threading
import time

import httpx
import openai
import pytest

from quickmoe.checkpoint.default_model import ensure_tiny_random_model
from quickmoe.llm import LLM
from quickmoe.server.app import create_app
from quickmoe.server.async_engine import AsyncEngine
from quickmoe.server.config import ServerConfig
from quickmoe.server.engine_process import EngineHost, EngineInfo, RemoteCore
from quickmoe.server.serve import QuickMoEServer, bind_socket, uvicorn_config

API_KEY = "test-key-" + str(time.time_ns())
MODEL = "tiny"
MAX_MODEL_LEN = 256


class ServerThread:
    """create_app(llm, config) served by uvicorn on a background thread until stop()."""

    def __init__(self, llm: LLM, config: ServerConfig) -> None:
        self.llm = llm
        self.app = create_app(llm, config)
        sock = bind_socket("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.server = QuickMoEServer(uvicorn_config(self.app, config), url=self.url)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)

    @property
    def serving(self):
        return self.app.state.serving

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "the server did not stop"


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def metric_values(text: str, name: str) -> dict[str, float]:
    """{label text: value} of every sample of `name` in a Prometheus exposition."""
    pattern = re.compile(rf"^{re.escape(name)}(\{{[^}}]*\}})? (\S+)$", re.M)
    return {m.group(1) or "": float(m.group(2)) for m in pattern.finditer(text)}


@pytest.fixture(scope="session")
def tiny_llm() -> LLM:
    # the tiny random gpt-oss: its o200k_harmony vocabulary is what chat, tools and the Responses API speak
    return LLM(ensure_tiny_random_model(), device="cpu", max_model_len=MAX_MODEL_LEN, kv_cache_memory=64 << 20)


@pytest.fixture(scope="session")
def small_llm() -> LLM:
    """One request at a time and a short context: the queue, failure and fuzz servers."""
    return LLM(ensure_tiny_random_model(), device="cpu", max_model_len=128, max_num_seqs=1, kv_cache_memory=16 << 20)


@pytest.fixture(scope="session")
def server(tiny_llm):
    """The main server: an API key, the default queue."""
    running = ServerThread(tiny_llm, ServerConfig(port=0, api_key=API_KEY, served_model_name=MODEL))
    yield running
    running.stop()


@pytest.fixture()
def http(server):
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60,
                      trust_env=False) as client:
        yield client


@pytest.fixture()
def client(server):
    """The official openai client against the main server."""
    return openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0)


@pytest.fixture()
def aclient(server):
    return openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0)


@pytest.fixture(params=["thread", "pipe"])
def backend(request):
    """make(engine, **options) -> AsyncEngine over `engine`, its step loop on a thread here or behind a pipe."""
    hosts = []

    def make(engine, **options):
        if request.param == "thread":
            return AsyncEngine(engine, **options)
        front, back = multiprocessing.Pipe()
        info = EngineInfo(model_dir="scripted", vocab_size=1000, max_model_len=10**6,
                          max_num_seqs=engine.scheduler.max_num_seqs, server_config=ServerConfig(stats_interval_s=None))
        host = threading.Thread(target=EngineHost(engine, back, info).run, daemon=True)
        host.start()
        hosts.append(host)
        assert front.recv() == info
        return AsyncEngine(RemoteCore(front, info, tokenizer=None), **options)

    yield make
    for host in hosts:  # the engine's side ended with the frontend's stop (or its death)
        host.join(timeout=10)
        assert not host.is_alive()
