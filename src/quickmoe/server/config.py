"""ServerConfig: the HTTP server's options, validated at construction (torch-free: the CLI checks its flags
before the model loads)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from quickmoe.errors import ConfigError

__all__ = ["SamplingDefaults", "ServerConfig", "load_sampling_defaults"]

DEFAULT_MAX_WAITING = 256
DEFAULT_DRAIN_TIMEOUT_S = 60.0
DEFAULT_MAX_BODY_BYTES = 32 * 2**20


@dataclass(frozen=True)
class SamplingDefaults:
    """Sampling values for the fields a request leaves out (`--generation-config`: the model's
    generation_config.json); None: quickmoe's own default (temperature 1, no top-k / top-p / min-p limit, no
    repetition penalty, max_tokens 16 on completions and what the context leaves on chat)."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("temperature", "top_p", "min_p", "repetition_penalty"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
                raise ConfigError(f"generation config {name} = {value!r}: expected a number >= 0")
        for name in ("top_k", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ConfigError(f"generation config {name} = {value!r}: expected an integer >= 0")


def load_sampling_defaults(directory: Path) -> SamplingDefaults:
    """The sampling fields of DIR/generation_config.json (none when the file is absent; ConfigError naming the file
    when it is not valid JSON or a value is out of range)."""
    path = Path(directory) / "generation_config.json"
    if not path.is_file():
        return SamplingDefaults()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read it as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    top_k = data.get("top_k")
    return SamplingDefaults(temperature=data.get("temperature"), top_p=data.get("top_p"),
                            top_k=None if top_k in (None, 0) else top_k, min_p=data.get("min_p"),
                            repetition_penalty=data.get("repetition_penalty"), max_tokens=data.get("max_new_tokens"))


@dataclass(frozen=True)
class ServerConfig:
    """`quickmoe serve` options.

    host/port: where to listen (127.0.0.1 unless told otherwise; port 0 picks a free one). api_key: when set,
    /v1/* needs `Authorization: Bearer <api_key>` (401 otherwise). max_waiting: requests accepted beyond the
    running batch; more get 503. served_model_name: the `model` clients must name (None: the app derives one).
    drain_timeout_s: on SIGTERM, how long in-flight requests may take to finish before they are cancelled.
    max_body_bytes: larger request bodies get 413. access_log: log every HTTP request. log_requests: log each
    generation request (its id, prompt length and parameters) and its end. stats_interval_s: how often the engine
    thread logs its one-line stats while it runs (None: never). sampling_defaults: values for the sampling fields
    a request leaves out. frontend_process: `quickmoe serve` runs the HTTP server in a process of its own beside
    the engine's (server/engine_process.py); false: both in one process. enable_step_profile: POST /profile_steps
    traces the next engine steps' CUDA kernels by op family on request (server/profile_steps.py; off by default:
    the traced steps run slower).
    """

    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    max_waiting: int = DEFAULT_MAX_WAITING
    served_model_name: str | None = None
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    access_log: bool = False
    log_requests: bool = False
    stats_interval_s: float | None = 10.0
    sampling_defaults: SamplingDefaults = field(default_factory=SamplingDefaults)
    frontend_process: bool = True
    enable_step_profile: bool = False

    def __post_init__(self) -> None:
        def fail(name: str, expected: str) -> ConfigError:
            return ConfigError(f"server option {name} = {getattr(self, name)!r}: expected {expected}")

        def is_int(value: object) -> bool:
            return isinstance(value, int) and not isinstance(value, bool)

        if not isinstance(self.host, str) or not self.host.strip() or any(c.isspace() for c in self.host):
            raise fail("host", "a host name or IP address such as 127.0.0.1 or 0.0.0.0")
        if not is_int(self.port) or not 0 <= self.port <= 65535:
            raise fail("port", "an integer in [0, 65535] (0: any free port)")
        if self.api_key is not None and (not isinstance(self.api_key, str) or not self.api_key
                                         or any(c.isspace() for c in self.api_key)):
            raise fail("api_key", "None or a non-empty key without spaces (an empty or blank key would leave the "
                       "server open: give a real key, or leave --api-key and $QUICKMOE_API_KEY unset for none)")
        if not is_int(self.max_waiting) or self.max_waiting < 1:
            raise fail("max_waiting", "an integer >= 1")
        if self.served_model_name is not None and (not isinstance(self.served_model_name, str)
                                                   or not self.served_model_name.strip()):
            raise fail("served_model_name", "None or a non-empty name")
        if isinstance(self.drain_timeout_s, bool) or not isinstance(self.drain_timeout_s, (int, float)) \
                or not 0 < self.drain_timeout_s < float("inf"):
            raise fail("drain_timeout_s", "a number of seconds > 0")
        if not is_int(self.max_body_bytes) or self.max_body_bytes < 1024:
            raise fail("max_body_bytes", "an integer >= 1024")
        if not isinstance(self.access_log, bool):
            raise fail("access_log", "true or false")
        if not isinstance(self.log_requests, bool):
            raise fail("log_requests", "true or false")
        if not isinstance(self.frontend_process, bool):
            raise fail("frontend_process", "true or false")
        if not isinstance(self.enable_step_profile, bool):
            raise fail("enable_step_profile", "true or false")
        if self.stats_interval_s is not None and (isinstance(self.stats_interval_s, bool) or not isinstance(
                self.stats_interval_s, (int, float)) or not 0 < self.stats_interval_s < float("inf")):
            raise fail("stats_interval_s", "None or a number of seconds > 0")
        if not isinstance(self.sampling_defaults, SamplingDefaults):
            raise fail("sampling_defaults", "a SamplingDefaults")

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"
