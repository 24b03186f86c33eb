"""Server metrics through prometheus_client, under the `quickmoe:` prefix with vLLM's metric stems (a dashboard made
for `vllm:` works after renaming the prefix), every sample labelled with model_name.

Histograms: time_to_first_token_seconds (arrival -> first token out of the engine), inter_token_latency_seconds
(between a request's consecutive tokens), e2e_request_latency_seconds (arrival -> last token, completed requests),
request_queue_time_seconds (arrival -> first scheduled). Counters: prompt_tokens_total and request_success_total
(by finished_reason, aborts included) per finished request, generation_tokens_total per step,
num_preemptions_total, prefix_cache_queries_total and prefix_cache_hits_total (tokens), request_errors_total (by
HTTP status); where the engine times its steps (quickmoe's own): engine_steps_total, engine_step_tokens_total and
engine_step_device_seconds_total by step kind, engine_device_idle_seconds_total (the device waiting for the host
between steps) and engine_step_host_seconds_total (the host queueing steps): `bench serve` reads them per level.
Gauges: num_requests_running, num_requests_waiting, kv_cache_usage_perc (a fraction, as vLLM's: the
fullest cache group) and per group, kv_cache_sequences (requests holding blocks), startup_phase_seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from quickmoe.executor.step_totals import STEP_KINDS
from quickmoe.startup.report import StartupReport

__all__ = ["CONTENT_TYPE", "EngineSnapshot", "ServerMetrics"]

PREFIX = "quickmoe:"
CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST
TTFT_BUCKETS = (0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0)
ITL_BUCKETS = (0.001, 0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15,
               0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 20.0, 80.0)
E2E_BUCKETS = (0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0,
               240.0, 480.0, 960.0, 1920.0, 7680.0)
QUEUE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0,
                 640.0)
prometheus_client.disable_created_metrics()  # no `_created` series (vLLM does the same)


@dataclass(frozen=True)
class EngineSnapshot:
    """The engine's state after its last step (taken on the engine thread)."""

    num_running: int = 0
    num_waiting: int = 0
    kv_cache_usage: tuple[tuple[str, float], ...] = ()
    num_sequences_with_blocks: int = 0
    num_preemptions: int = 0
    num_prefix_queries: int = 0  # tokens
    num_prefix_hits: int = 0
    num_scheduled_tokens: int = 0
    steps: object | None = None  # executor.step_timer.StepTotals when the engine times its steps


class _EngineCollector:
    """The snapshot's gauges and cumulative counters, read at each scrape."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self.metrics = metrics

    def collect(self):
        m = self.metrics
        snap, label, name = m.snapshot_source(), [m.model_name], m.model_name
        families = []

        def gauge(stem: str, help: str, value: float) -> None:
            family = GaugeMetricFamily(PREFIX + stem, help, labels=["model_name"])
            family.add_metric(label, value)
            families.append(family)

        def counter(stem: str, help: str, value: float) -> None:
            family = CounterMetricFamily(PREFIX + stem, help, labels=["model_name"])
            family.add_metric(label, value)
            families.append(family)

        gauge("num_requests_running", "Requests in the engine's running batch.", snap.num_running)
        gauge("num_requests_waiting", "Requests accepted and waiting to run.", m.num_waiting_source())
        gauge("kv_cache_usage_perc", "Fraction of the KV-cache blocks in use (the fullest cache group).",
              max((u for _, u in snap.kv_cache_usage), default=0.0))
        groups = GaugeMetricFamily(PREFIX + "kv_cache_group_usage_perc", "Fraction of each KV-cache group's blocks "
                                   "in use.", labels=["model_name", "group"])
        for group, usage in snap.kv_cache_usage:
            groups.add_metric([name, group], usage)
        families.append(groups)
        gauge("kv_cache_sequences", "Requests holding KV-cache blocks.", snap.num_sequences_with_blocks)
        counter("num_preemptions", "Preemptions (a request's KV cache freed, to recompute).", snap.num_preemptions)
        counter("prefix_cache_queries", "Prompt tokens looked up in the prefix cache.", snap.num_prefix_queries)
        counter("prefix_cache_hits", "Prompt tokens found in the prefix cache.", snap.num_prefix_hits)
        steps = snap.steps
        if steps is not None:
            def by_kind(stem: str, help: str, values: dict) -> None:
                family = CounterMetricFamily(PREFIX + stem, help, labels=["model_name", "kind"])
                for kind in STEP_KINDS:
                    family.add_metric([name, kind], values.get(kind, 0))
                families.append(family)

            by_kind("engine_steps", "Engine steps the device finished, by kind (decode: every row one token; "
                    "prefill: none; mixed).", steps.steps)
            by_kind("engine_step_tokens", "Tokens those steps computed, by kind.", steps.tokens)
            by_kind("engine_step_device_seconds", "Device time of those steps, by kind (each step from the start "
                    "of its work on the device to its end).", steps.device_seconds)
            counter("engine_device_idle_seconds", "Device time between consecutive steps while the engine had work: "
                    "the device waiting for the host.", steps.idle_seconds)
            counter("engine_step_host_seconds", "Host time spent queueing those steps.", steps.host_seconds)
        report = m.startup_report
        if report is not None:
            phases = GaugeMetricFamily(PREFIX + "startup_phase_seconds", "Duration of each start-up phase of this "
                                       "server process.", labels=["model_name", "phase"])
            for phase, seconds in report.phases.items():
                if seconds is not None:
                    phases.add_metric([name, phase], seconds)
            families.append(phases)
            gauge("startup_total_seconds", "Process creation to the last start-up phase.", report.total)
        return families


class ServerMetrics:
    """What /metrics shows, in its own registry (one per app). Observations come from the event loop and the
    engine thread (prometheus_client's metrics are thread-safe); `render` may run on any thread."""

    def __init__(self, model_name: str, startup_report: StartupReport | None = None) -> None:
        self.model_name = model_name
        self.startup_report = startup_report
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ["model_name"]

        def histogram(stem: str, help: str, buckets) -> Histogram:
            return Histogram(PREFIX + stem, help, labels, registry=self.registry, buckets=buckets).labels(model_name)

        def counter(stem: str, help: str, extra: tuple[str, ...] = ()) -> Counter:
            made = Counter(PREFIX + stem, help, labels + list(extra), registry=self.registry)
            return made if extra else made.labels(model_name)

        self.ttft = histogram("time_to_first_token_seconds", "Time from a request's arrival to its first token.",
                              TTFT_BUCKETS)
        self.itl = histogram("inter_token_latency_seconds", "Time between consecutive tokens of a request.",
                             ITL_BUCKETS)
        self.e2e = histogram("e2e_request_latency_seconds", "Time from a request's arrival to its last token "
                             "(completed requests).", E2E_BUCKETS)
        self.queue = histogram("request_queue_time_seconds", "Time from a request's arrival to its first step.",
                               QUEUE_BUCKETS)
        self.prompt_tokens = counter("prompt_tokens", "Prompt tokens of finished requests.")
        self.generation_tokens = counter("generation_tokens", "Tokens generated, counted at each step.")
        self.finished = counter("request_success", "Finished requests by finish reason.", ("finished_reason",))
        self.errors = counter("request_errors", "Error responses by HTTP status.", ("status",))
        self.snapshot_source = EngineSnapshot
        self.num_waiting_source = lambda: 0
        self.registry.register(_EngineCollector(self))

    def watch(self, snapshot_source, num_waiting_source) -> None:
        """Where the engine's state is read at each scrape (callables: the latest EngineSnapshot, the number of
        requests waiting)."""
        self.snapshot_source, self.num_waiting_source = snapshot_source, num_waiting_source

    def observe_first_token(self, seconds: float) -> None:
        self.ttft.observe(seconds)

    def observe_token_gap(self, seconds: float) -> None:
        self.itl.observe(seconds)

    def observe_queue_time(self, seconds: float) -> None:
        self.queue.observe(seconds)

    def count_generated(self, tokens: int) -> None:
        self.generation_tokens.inc(tokens)

    def observe_finished(self, finish_reason: str, e2e_seconds: float, prompt_tokens: int) -> None:
        self.finished.labels(self.model_name, finish_reason).inc()
        self.prompt_tokens.inc(prompt_tokens)
        if finish_reason != "abort":
            self.e2e.observe(e2e_seconds)

    def count_error(self, status: int) -> None:
        self.errors.labels(self.model_name, str(status)).inc()

    def render(self) -> bytes:
        return prometheus_client.generate_latest(self.registry)
