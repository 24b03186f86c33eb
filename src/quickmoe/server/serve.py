"""Running the app under uvicorn: the listening socket bound before the model loads (a taken port fails at once),
one log line with the URL when ready, and SIGTERM/SIGINT draining in-flight requests before a clean exit.

The drain: the first SIGTERM/SIGINT makes the engine refuse new requests (503 with an OpenAI error body: the socket
stays open, so clients are answered rather than refused a connection) while the requests in flight go on. When
they are all done, or at the drain timeout, uvicorn's own shutdown runs. At the timeout the requests still in
flight are ended by the engine (EngineDrained): a whole response is a 503 body, a stream gets an error event and
`data: [DONE]`; their KV blocks are freed; after a short grace for those last bytes the process exits 0. A second
signal stops at once."""

from __future__ import annotations

import logging
import signal
import socket
import time

import uvicorn

from quickmoe.errors import ConfigError
from quickmoe.server.config import ServerConfig

__all__ = ["QuickMoEServer", "bind_socket", "run_server"]

logger = logging.getLogger("quickmoe.server")
FINAL_GRACE_S = 5.0  # after the drain: for the last responses' bytes, then uvicorn cancels what is left


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port), not yet listening: connections are refused until the server runs.
    ConfigError when the address is taken or not local."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(f"server option host = {host!r}: cannot resolve it ({exc})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); is another server running "
                          "there? (--host/--port)") from None
    sock.set_inheritable(True)
    return sock


class QuickMoEServer(uvicorn.Server):
    """uvicorn's server, plus: the ready line, the drain of the module docstring from the first SIGTERM/SIGINT,
    and exiting normally (status 0) after it. `drain_timeout_s`: how long requests in flight may go on."""

    def __init__(self, config: uvicorn.Config, url: str, drain_timeout_s: float = 60.0) -> None:
        super().__init__(config)
        self.url = url
        self.drain_timeout_s = drain_timeout_s
        self._drain_deadline: float | None = None  # set by the first signal
        self._ended_at: float | None = None  # when the requests left at the deadline were ended

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            serving = self.config.app.state.serving
            logger.info("quickmoe is serving %r at %s (OpenAI API under %s/v1; /health, /metrics)",
                        serving.model_name, self.url, self.url)

    def handle_exit(self, sig, frame) -> None:
        serving = getattr(self.config.app.state, "serving", None)
        if serving is not None and self._drain_deadline is None and not self.should_exit:
            name = signal.Signals(sig).name if sig in signal.Signals.__members__.values() else str(sig)
            logger.info("%s: draining %d request(s) in flight (at most %.0f s), then exiting; new requests get 503",
                        name, serving.engine.num_in_flight, self.drain_timeout_s)
            serving.engine.begin_drain()
            self._drain_deadline = time.monotonic() + self.drain_timeout_s  # on_tick drives the drain
            return
        super().handle_exit(sig, frame)  # no app state, or a second signal: stop now
        # uvicorn re-raises the signal after its graceful shutdown, which would end the process by the
        # signal; a completed drain is a normal exit.
        getattr(self, "_captured_signals", []).clear()

    async def on_tick(self, counter: int) -> bool:
        if self._drain_deadline is not None and not self.should_exit:
            self.should_exit = self._drained(time.monotonic())
        return await super().on_tick(counter)

    def _drained(self, now: float) -> bool:
        """One look at the drain (every 0.1 s): whether uvicorn may shut down now."""
        engine = self.config.app.state.serving.engine
        if not engine.num_in_flight and not self.server_state.tasks:
            if self._ended_at is None:
                logger.info("drained: every request in flight finished")
            return True
        if self._ended_at is None and now >= self._drain_deadline:
            count = engine.end_in_flight(f"the drain timeout ({self.drain_timeout_s:g} s) expired")
            logger.warning("drain timeout: ended %d request(s) still in flight (503 / an error event)", count)
            self._ended_at = now
        return self._ended_at is not None and (not self.server_state.tasks or now >= self._ended_at + FINAL_GRACE_S)


def uvicorn_config(app, config: ServerConfig) -> uvicorn.Config:
    return uvicorn.Config(app, log_config=None, access_log=config.access_log, lifespan="on",
                          timeout_graceful_shutdown=FINAL_GRACE_S, timeout_keep_alive=30)


def run_server(app, config: ServerConfig, sock: socket.socket | None = None) -> None:
    """Serve `app` (create_app) until SIGTERM/SIGINT; `sock` from bind_socket (bound now when None)."""
    sock = sock if sock is not None else bind_socket(config.host, config.port)
    port = sock.getsockname()[1]
    host = f"[{config.host}]" if ":" in config.host else config.host
    server = QuickMoEServer(uvicorn_config(app, config), url=f"http://{host}:{port}",
                            drain_timeout_s=config.drain_timeout_s)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
