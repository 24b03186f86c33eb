"""Running the app under uvicorn: the listening socket bound before the model loads (a taken port fails at once),
one log line with the URL when ready, and SIGTERM/SIGINT draining in-flight requests before a clean exit."""

from __future__ import annotations

import logging
import signal
import socket

import uvicorn

from quickmoe.errors import ConfigError
from quickmoe.server.config import ServerConfig

__all__ = ["QuickMoEServer", "bind_socket", "run_server"]

logger = logging.getLogger("quickmoe.server")


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
    """uvicorn's server, plus: the ready line, refusing new requests (503) from the first SIGTERM while the
    requests in flight finish, and exiting normally (status 0) after that drain."""

    def __init__(self, config: uvicorn.Config, url: str) -> None:
        super().__init__(config)
        self.url = url

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            serving = self.config.app.state.serving
            logger.info("quickmoe is serving %r at %s (OpenAI API under %s/v1; /health, /metrics)",
                        serving.model_name, self.url, self.url)

    def handle_exit(self, sig, frame) -> None:
        serving = getattr(self.config.app.state, "serving", None)
        if serving is not None and not self.should_exit:
            name = signal.Signals(sig).name if sig in signal.Signals.__members__.values() else str(sig)
            logger.info("%s: draining %d request(s) in flight, then exiting", name, serving.engine.num_in_flight)
            serving.engine.begin_drain()
        super().handle_exit(sig, frame)
        # uvicorn re-raises the signal after its graceful shutdown, which would end the process by the
        # signal; a completed drain is a normal exit.
        getattr(self, "_captured_signals", []).clear()


def uvicorn_config(app, config: ServerConfig) -> uvicorn.Config:
    return uvicorn.Config(app, log_config=None, access_log=config.access_log, lifespan="on",
                          timeout_graceful_shutdown=config.drain_timeout_s, timeout_keep_alive=30)


def run_server(app, config: ServerConfig, sock: socket.socket | None = None) -> None:
    """Serve `app` (create_app) until SIGTERM/SIGINT; `sock` from bind_socket (bound now when None)."""
    sock = sock if sock is not None else bind_socket(config.host, config.port)
    port = sock.getsockname()[1]
    host = f"[{config.host}]" if ":" in config.host else config.host
    server = QuickMoEServer(uvicorn_config(app, config), url=f"http://{host}:{port}")
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
