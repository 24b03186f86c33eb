"""`quickmoe serve` in two processes: the engine's step loop in the process that loaded the model, the HTTP server
(event loop, request parsing, JSON and SSE of every stream) in a frontend process of its own.

Both loops are Python. In one interpreter they take turns on one GIL: at concurrency 128 the step loop took 13.9
ms of host time to queue a 127-row step while the event loop streamed, where `bench generate` takes 5.4 ms for
256 rows alone (docs/benchmarks.md). In two processes neither waits for the other.

    parent (`quickmoe serve`)                       frontend (spawned at once, before the model loads)
    bind the socket, start the frontend        ->   import the server, load the tokenizer, wait for EngineInfo
    load the model, send EngineInfo            ->   check requests (RequestChecker), serve HTTP (RemoteCore)
    run_engine_host: the step loop, requests   <->  ("add", id, prompt ids, params) / ("abort", id, index) / ("stop",)
    and aborts from the pipe, a CoreBatch out       CoreBatch per step -> AsyncEngine -> the request streams

Signals: the frontend runs in a process group of its own, so SIGINT/SIGTERM reach the parent only, which passes
each one on: the frontend drains as before (server/serve.py), says stop, and exits; the step loop then ends and
the parent exits with the frontend's status. If the frontend dies, the engine aborts its requests and the parent
exits 1; if the parent dies, the frontend's pipe closes: its requests fail, /health answers 503, and it exits.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import signal
import socket
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from quickmoe.engine.request_checks import RequestChecker
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.errors import RequestError
from quickmoe.server.config import ServerConfig
from quickmoe.server.core_client import CoreClient
from quickmoe.server.engine_core import CoreBatch, EngineCore

__all__ = ["EngineHost", "EngineInfo", "FrontendProcess", "RemoteCore", "run_engine_host", "start_frontend"]

logger = logging.getLogger(__name__)

FRONTEND_EXIT_TIMEOUT_S = 30.0  # after the step loop ended: how long the frontend may take to exit
_STOPPED = "stopped"  # the engine's last message after a stop (a thread blocked reading a pipe must get an EOF
# from the other side: closing its own end does not wake it)


@dataclass(frozen=True)
class EngineInfo:
    """What the frontend needs of the loaded model, sent once when it is ready."""

    model_dir: str
    vocab_size: int
    max_model_len: int
    max_num_seqs: int
    server_config: ServerConfig  # final: with the model's sampling defaults
    startup_report: object | None = None  # startup.report.StartupReport, shown by /metrics


# -- the frontend process ----------------------------------------------------------------------------------------

class RemoteCore(CoreClient):
    """The frontend's end of the pipe: requests and aborts go to the engine process; a thread receives its batches.
    Carries what the app needs of the model (tokenizer, sizes, start-up report) and checks requests itself."""

    def __init__(self, conn, info: EngineInfo, tokenizer) -> None:
        self.conn = conn
        self.tokenizer = tokenizer
        self.model_dir = Path(info.model_dir)
        self.vocab_size = info.vocab_size
        self.max_model_len = info.max_model_len
        self.max_num_seqs = info.max_num_seqs
        self.startup_report = info.startup_report
        self.checker = RequestChecker(tokenizer, info.vocab_size, info.max_model_len)
        self._send_lock = threading.Lock()
        self._receiver: threading.Thread | None = None
        self._stopping = False
        self.on_engine_gone: Callable[[], None] | None = None  # called (receiver thread) when the pipe closed

    def start(self, publish: Callable[[CoreBatch], None]) -> None:
        assert self._receiver is None, "RemoteCore.start() twice"
        self._receiver = threading.Thread(target=self._receive, args=(publish,), name="quickmoe-engine-pipe",
                                          daemon=True)
        self._receiver.start()

    def _receive(self, publish: Callable[[CoreBatch], None]) -> None:
        """Until the engine closes the pipe: after our stop (its last batch came), or because it died."""
        while True:
            try:
                batch = self.conn.recv()
            except (EOFError, OSError):
                if not self._stopping:
                    logger.critical("the engine process is gone; failing every request in flight")
                    publish(CoreBatch(failed=(), error="the engine process exited", dead=True))
                    if self.on_engine_gone is not None:
                        self.on_engine_gone()
                return
            if batch == _STOPPED:  # the loop ended after our stop: close our end, which ends the engine's reader
                self.conn.close()
                return
            publish(batch)
            if batch.dead and self.on_engine_gone is not None:  # its loop broke: nothing will serve requests
                self.on_engine_gone()

    def _send(self, message: tuple) -> None:
        with self._send_lock:
            try:
                self.conn.send(message)
            except (OSError, ValueError):  # the engine is gone: the receiver reports it
                logger.debug("engine pipe closed; dropping %s", message[0])

    def add_request(self, request_id: str, prompt_ids: Sequence[int], params: SamplingParams) -> None:
        """RequestError now, as `Engine.add_request` raises it in one process (the same checks; a grammar the
        handler checked already comes from the checker's cache)."""
        params = self.checker.params(request_id, params)
        ids = self.checker.prompt_ids(list(prompt_ids))
        if params.structured is not None:
            self.checker.structured(params.structured)
        self._send(("add", request_id, ids, params))

    def abort(self, request_id: str, index: int | None = None) -> None:
        self._send(("abort", request_id, index))

    def profile(self, profile_id: int, steps: int) -> None:
        self._send(("profile", profile_id, steps))

    def stop(self) -> None:
        """The engine ends its loop once what is in flight was aborted or finished, then closes the pipe."""
        self._stopping = True
        self._send(("stop",))

    def join(self, timeout: float) -> bool:
        if self._receiver is None:
            return True
        self._receiver.join(timeout)
        return not self._receiver.is_alive()

    @property
    def alive(self) -> bool:
        return self._receiver is not None and self._receiver.is_alive()


def _frontend_main(conn, sock: socket.socket, model_hint: str | None, log_level: int) -> None:
    """The frontend process: see the module docstring."""
    os.setpgrp()  # SIGINT from a terminal reaches the parent only, which passes it on once
    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    from quickmoe.startup.gc_pause import collect_and_freeze, serving_gc_frozen
    from quickmoe.tokenizer import load_tokenizer

    freeze_heap = serving_gc_frozen()  # the parent checked the switch's value before it started this process

    def load_for_encoding(model_dir: Path):  # -> Tokenizer, ready to encode (this process tokenizes every prompt)
        tokenizer = load_tokenizer(model_dir)
        tokenizer.encode("")  # what encoding loads on first use (harmony's BPE) loads now, not in the first request
        return tokenizer

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="quickmoe-tokenizer") as pool:
        early = pool.submit(load_for_encoding, Path(model_hint)) if model_hint is not None else None
        from quickmoe.server.app import create_app  # imported while the tokenizer (and the model) load
        from quickmoe.server.serve import run_server

        if freeze_heap:  # while the engine loads: the full passes while serving skip the imports' objects
            collect_and_freeze("in the frontend, while the engine loads")
        try:
            info = conn.recv()
        except (EOFError, OSError):  # the engine failed to start (it reports why) or was stopped
            return
        same = early is not None and Path(model_hint).resolve() == Path(info.model_dir).resolve()
        try:
            tokenizer = early.result() if same else load_for_encoding(Path(info.model_dir))
        except Exception:
            logger.exception("the frontend could not load the tokenizer of %s", info.model_dir)
            raise SystemExit(1) from None
    tokenizer.accept_model_ids(info.vocab_size)  # the model's ids past the tokenizer's: no text
    core = RemoteCore(conn, info, tokenizer)
    core.on_engine_gone = lambda: os.kill(os.getpid(), signal.SIGTERM)  # drain (nothing is left) and exit
    app = create_app(core, info.server_config, startup_report=info.startup_report, model_dir=info.model_dir)
    if freeze_heap:
        gc.freeze()  # the tokenizer's and the app's objects too (no collection: O(1), nothing on the way to ready)
    run_server(app, info.server_config, sock)


@dataclass
class FrontendProcess:
    """The frontend, started: the parent's end of the pipe and the process."""

    conn: object
    process: multiprocessing.process.BaseProcess

    def abandon(self) -> None:
        """The engine could not start: close the pipe (the frontend then exits) and wait for it."""
        self.conn.close()
        self.process.join(FRONTEND_EXIT_TIMEOUT_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def start_frontend(sock: socket.socket, model_hint: str | None, log_level: int) -> FrontendProcess:
    """Spawn the frontend now (it imports the server and loads the tokenizer while the model loads here)."""
    context = multiprocessing.get_context("spawn")
    parent_end, child_end = context.Pipe()
    process = context.Process(target=_frontend_main, args=(child_end, sock, model_hint, log_level),
                              name="quickmoe-frontend", daemon=False)
    process.start()
    child_end.close()
    return FrontendProcess(parent_end, process)


# -- the engine's process ----------------------------------------------------------------------------------------

class EngineHost:
    """The engine's end of the pipe: `run()` sends `info`, then runs the step loop on the calling thread while a
    thread reads requests, aborts and stop from the pipe, and returns once the loop ended (after a stop, or when
    the frontend went away: its requests are aborted first)."""

    def __init__(self, engine, conn, info: EngineInfo) -> None:
        self.engine = engine
        self.conn = conn
        self.info = info
        self._send_lock = threading.Lock()
        self._gone = threading.Event()  # nothing can be sent any more
        self._stopping = threading.Event()  # the frontend said stop: its end of the pipe closes next
        self.core = EngineCore(engine, self._publish, stats_interval_s=info.server_config.stats_interval_s,
                               time_steps=True)

    def _publish(self, batch) -> None:
        if self._gone.is_set():
            return
        with self._send_lock:
            try:
                self.conn.send(batch)
            except (OSError, ValueError):
                self._gone.set()

    def _read(self) -> None:
        core = self.core
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                if not self._gone.is_set() and not self._stopping.is_set():
                    logger.error("the HTTP frontend exited; aborting its requests")
                self._gone.set()
                for request_id in self.engine.live_request_ids():
                    core.abort(request_id)
                core.stop()
                return
            kind = message[0]
            if kind == "add":
                _, request_id, prompt_ids, params = message
                try:
                    core.add_request(request_id, prompt_ids, params)
                except RequestError as exc:  # checked by the frontend: only a race (a reused id) gets here
                    self._publish(CoreBatch(failed=(request_id,), error=str(exc)))
            elif kind == "abort":
                core.abort(message[1], message[2])
            elif kind == "profile":
                profile_id = message[1]
                core.request_profile(message[2], lambda doc, i=profile_id: self._publish(CoreBatch(profile=(i, doc))))
            elif kind == "stop":
                self._stopping.set()
                core.stop()

    def run(self) -> None:
        self._publish(self.info)
        reader = threading.Thread(target=self._read, name="quickmoe-frontend-pipe", daemon=True)
        reader.start()
        self.core.run()
        self._publish(_STOPPED)
        reader.join(FRONTEND_EXIT_TIMEOUT_S)  # the frontend closes its end on _STOPPED


def run_engine_host(engine, frontend: FrontendProcess, info: EngineInfo) -> int:
    """Serve the frontend's requests with `engine` until it stops (or dies), passing SIGINT/SIGTERM on to it.
    Returns the exit status for the command: the frontend's (0 after a drain), 1 when it failed or died."""

    def forward(sig, frame) -> None:  # the frontend drains; its stop then ends the loop here
        if frontend.process.is_alive():
            os.kill(frontend.process.pid, sig)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        EngineHost(engine, frontend.conn, info).run()
    finally:
        frontend.conn.close()
        frontend.process.join(FRONTEND_EXIT_TIMEOUT_S)
        if frontend.process.is_alive():
            logger.error("the HTTP frontend did not exit within %.0f s; killing it", FRONTEND_EXIT_TIMEOUT_S)
            frontend.process.kill()
            frontend.process.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    logger.info("engine stopped; %d sequence(s) hold KV blocks", engine.blocks.num_sequences)
    return 0 if frontend.process.exitcode == 0 else 1
