"""The figures of `quickmoe bench serve`: a level's statistics from its request results, and the tables printed."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RequestResult", "format_level", "overview", "percentile", "summarize"]


@dataclass
class RequestResult:
    """One request as the client saw it. `disconnected`: the client left on purpose (--disconnect-fraction);
    `rejected`: the server answered 503 (a full queue, or shutting down): neither counts as a failure."""

    ok: bool = False
    error: str | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft: float | None = None
    itl: list[float] = field(default_factory=list)
    latency: float = 0.0
    disconnected: bool = False
    rejected: bool = False


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear between the nearest ranks; nan for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def summarize(results: list[RequestResult], duration: float, concurrency: int) -> dict[str, Any]:
    """The level's figures: counts, throughputs, TTFT / ITL / TPOT / E2E statistics in milliseconds. Requests the
    client cut on purpose and 503s are counted apart, not as failures."""
    good = [r for r in results if r.ok and not r.disconnected]
    left = [r for r in results if r.disconnected]
    rejected = [r for r in results if r.rejected]
    ms = 1000.0
    ttft = [r.ttft * ms for r in good]
    itl = [gap * ms for r in good for gap in r.itl]
    tpot = [(r.latency - r.ttft) * ms / (r.output_tokens - 1) for r in good if r.output_tokens > 1]
    e2e = [r.latency * ms for r in good]
    input_tokens = sum(r.prompt_tokens for r in good)
    output_tokens = sum(r.output_tokens for r in good)
    duration = max(duration, 1e-9)
    return {
        "concurrency": concurrency, "successful_requests": len(good), "disconnected_requests": len(left),
        "rejected_requests": len(rejected), "failed_requests": len(results) - len(good) - len(left) - len(rejected),
        "duration_s": duration, "total_input_tokens": input_tokens, "total_output_tokens": output_tokens,
        "request_throughput": len(good) / duration, "input_throughput": input_tokens / duration,
        "output_throughput": output_tokens / duration,
        "total_token_throughput": (input_tokens + output_tokens) / duration,
        "mean_ttft_ms": _mean(ttft), "median_ttft_ms": percentile(ttft, 50), "p99_ttft_ms": percentile(ttft, 99),
        "mean_itl_ms": _mean(itl), "median_itl_ms": percentile(itl, 50), "p95_itl_ms": percentile(itl, 95),
        "p99_itl_ms": percentile(itl, 99), "max_itl_ms": max(itl) if itl else math.nan,
        "mean_tpot_ms": _mean(tpot), "median_tpot_ms": percentile(tpot, 50),
        "mean_e2e_ms": _mean(e2e), "median_e2e_ms": percentile(e2e, 50),
        "errors": sorted({r.error for r in results if r.error and not r.rejected})[:5],
    }


_ROWS = [("Successful requests", "successful_requests", "d"), ("Failed requests", "failed_requests", "d"),
         ("Disconnected by the client", "disconnected_requests", "d"), ("Rejected (503)", "rejected_requests", "d"),
         ("Benchmark duration (s)", "duration_s", ".2f"), ("Total input tokens", "total_input_tokens", "d"),
         ("Total generated tokens", "total_output_tokens", "d"),
         ("Request throughput (req/s)", "request_throughput", ".2f"),
         ("Input token throughput (tok/s)", "input_throughput", ".2f"),
         ("Output token throughput (tok/s)", "output_throughput", ".2f"),
         ("Total token throughput (tok/s)", "total_token_throughput", ".2f"),
         ("-Time to first token", None, None), ("Mean TTFT (ms)", "mean_ttft_ms", ".2f"),
         ("Median TTFT (ms)", "median_ttft_ms", ".2f"), ("P99 TTFT (ms)", "p99_ttft_ms", ".2f"),
         ("-Inter-token latency", None, None), ("Mean ITL (ms)", "mean_itl_ms", ".2f"),
         ("Median ITL (ms)", "median_itl_ms", ".2f"), ("P95 ITL (ms)", "p95_itl_ms", ".2f"),
         ("P99 ITL (ms)", "p99_itl_ms", ".2f"), ("Max ITL (ms)", "max_itl_ms", ".2f"),
         ("-Time per output token", None, None), ("Mean TPOT (ms)", "mean_tpot_ms", ".2f"),
         ("Median TPOT (ms)", "median_tpot_ms", ".2f"),
         ("-End-to-end latency", None, None), ("Mean E2E latency (ms)", "mean_e2e_ms", ".2f"),
         ("Median E2E latency (ms)", "median_e2e_ms", ".2f")]


def format_level(summary: dict[str, Any]) -> str:
    width = 52
    lines = [f" serve benchmark: concurrency {summary['concurrency']} ".center(width, "=")]
    for label, key, fmt in _ROWS:
        if key is None:
            lines.append(f" {label[1:]} ".center(width, "-"))
        else:
            lines.append(f"{label + ':':<38}{format(summary[key], fmt):>14}")
    lines.extend(f"error: {e}" for e in summary["errors"])
    lines.append("=" * width)
    return "\n".join(lines)


def overview(summaries: list[dict[str, Any]]) -> str:
    """One line per level. ITL is the gap between stream chunks as the client read them: under load one read can
    bring several chunks (gaps near 0) and a busy server sends several tokens in one chunk, so its median swings
    between runs; TPOT (a request's time after its first token over its tokens after the first) does not."""
    head = (f"{'conc':>5} {'ok':>5} {'fail':>5} {'req/s':>8} {'out tok/s':>10} {'tot tok/s':>10} "
            f"{'TTFT med':>9} {'TTFT p99':>9} {'ITL med':>8} {'ITL p99':>8} {'E2E med':>9} {'TPOT med':>9}  (ms)")
    rows = [f"{s['concurrency']:>5} {s['successful_requests']:>5} {s['failed_requests']:>5} "
            f"{s['request_throughput']:>8.2f} {s['output_throughput']:>10.1f} {s['total_token_throughput']:>10.1f} "
            f"{s['median_ttft_ms']:>9.1f} {s['p99_ttft_ms']:>9.1f} {s['median_itl_ms']:>8.2f} "
            f"{s['p99_itl_ms']:>8.2f} {s['median_e2e_ms']:>9.1f} {s['median_tpot_ms']:>9.2f}" for s in summaries]
    return "\n".join([head] + rows)
