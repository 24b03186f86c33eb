"""Server metrics in the Prometheus text format (version 0.0.4), written by hand (no dependency).

Histograms: time to first token (arrival -> first token out of the engine), inter-token latency (between a
request's consecutive tokens), end-to-end latency (arrival -> last token) of requests that completed.
Gauges: running and waiting requests, KV-cache usage per cache group, sequences holding KV blocks, and the
start-up phases of this process (StartupReport). Counters: prompt and generated tokens, finished requests by
finish reason, preemptions, error responses by status.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from quickmoe.startup.report import StartupReport

__all__ = ["EngineSnapshot", "Histogram", "ServerMetrics"]

PREFIX = "quickmoe_"
TTFT_BUCKETS = (0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0)
ITL_BUCKETS = (0.001, 0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15,
               0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 20.0, 80.0)
E2E_BUCKETS = (0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0,
               240.0, 480.0, 960.0, 1920.0, 7680.0)


@dataclass(frozen=True)
class EngineSnapshot:
    """The engine's state after its last step (taken on the engine thread)."""

    num_running: int = 0
    num_waiting: int = 0
    kv_cache_usage: tuple[tuple[str, float], ...] = ()
    num_sequences_with_blocks: int = 0
    num_preemptions: int = 0


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _label_text(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}" if labels else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


class Histogram:
    """Cumulative buckets (upper bounds `le`), sum and count of observations."""

    def __init__(self, name: str, help: str, buckets: Sequence[float]) -> None:
        assert list(buckets) == sorted(buckets), "bucket bounds must increase"
        self.name, self.help = PREFIX + name, help
        self.bounds = tuple(buckets)
        self.counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def render(self, labels: dict[str, str]) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        cumulative = 0
        for bound, count in zip(self.bounds + (math.inf,), self.counts):
            cumulative += count
            lines.append(f"{self.name}_bucket{_label_text({**labels, 'le': _number(bound)})} {cumulative}")
        lines.append(f"{self.name}_sum{_label_text(labels)} {_number(self.sum)}")
        lines.append(f"{self.name}_count{_label_text(labels)} {self.count}")
        return lines


class ServerMetrics:
    """What /metrics shows. Observations come from the event loop; `render` may run on any thread."""

    def __init__(self, model_name: str, startup_report: StartupReport | None = None) -> None:
        self.labels = {"model_name": model_name}
        self.startup_report = startup_report
        self.ttft = Histogram("time_to_first_token_seconds", "Time from a request's arrival to its first token.",
                              TTFT_BUCKETS)
        self.itl = Histogram("inter_token_latency_seconds", "Time between consecutive tokens of a request.",
                             ITL_BUCKETS)
        self.e2e = Histogram("e2e_request_latency_seconds",
                             "Time from a request's arrival to its last token (completed requests).", E2E_BUCKETS)
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.finished: Counter[str] = Counter()
        self.errors: Counter[int] = Counter()
        self._lock = threading.Lock()

    def observe_first_token(self, seconds: float) -> None:
        with self._lock:
            self.ttft.observe(seconds)

    def observe_token_gap(self, seconds: float) -> None:
        with self._lock:
            self.itl.observe(seconds)

    def observe_finished(self, finish_reason: str, e2e_seconds: float, prompt_tokens: int, output_tokens: int) -> None:
        with self._lock:
            self.finished[finish_reason] += 1
            self.prompt_tokens += prompt_tokens
            self.generation_tokens += output_tokens
            if finish_reason != "abort":
                self.e2e.observe(e2e_seconds)

    def count_error(self, status: int) -> None:
        with self._lock:
            self.errors[status] += 1

    def render(self, engine: EngineSnapshot, num_waiting: int) -> str:
        """The exposition text. `num_waiting` counts requests accepted but not running (queued in the engine
        or not yet taken in by its loop)."""
        labels = self.labels
        out: list[str] = []

        def sample(name: str, kind: str, help: str, values: list[tuple[dict[str, str], float]]) -> None:
            out.extend([f"# HELP {PREFIX}{name} {help}", f"# TYPE {PREFIX}{name} {kind}"])
            out.extend(f"{PREFIX}{name}{_label_text({**labels, **extra})} {_number(v)}" for extra, v in values)

        with self._lock:
            sample("num_requests_running", "gauge", "Requests in the engine's running batch.",
                   [({}, engine.num_running)])
            sample("num_requests_waiting", "gauge", "Requests accepted and waiting to run.", [({}, num_waiting)])
            sample("kv_cache_usage_ratio", "gauge", "Fraction of the KV-cache blocks in use, per cache group.",
                   [({"group": g}, u) for g, u in engine.kv_cache_usage])
            sample("kv_cache_sequences", "gauge", "Requests holding KV-cache blocks.",
                   [({}, engine.num_sequences_with_blocks)])
            sample("num_preemptions_total", "counter", "Preemptions (a request's KV cache freed, to recompute).",
                   [({}, engine.num_preemptions)])
            sample("prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
                   [({}, self.prompt_tokens)])
            sample("generation_tokens_total", "counter", "Tokens generated by finished requests.",
                   [({}, self.generation_tokens)])
            sample("request_success_total", "counter", "Finished requests by finish reason.",
                   [({"finished_reason": r}, n) for r, n in sorted(self.finished.items())])
            sample("request_errors_total", "counter", "Error responses by HTTP status.",
                   [({"status": str(s)}, n) for s, n in sorted(self.errors.items())])
            for histogram in (self.ttft, self.itl, self.e2e):
                out.extend(histogram.render(labels))
        report = self.startup_report
        if report is not None:
            phases = [({"phase": p}, v) for p, v in report.phases.items() if v is not None]
            sample("startup_phase_seconds", "gauge", "Duration of each start-up phase of this server process.",
                   phases)
            sample("startup_total_seconds", "gauge", "Process creation to the last start-up phase.",
                   [({}, report.total)])
        return "\n".join(out) + "\n"
