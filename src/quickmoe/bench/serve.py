"""`quickmoe bench serve`: a load generator for any OpenAI-compatible server.

For each concurrency level, `num_prompts` streamed /v1/completions requests, each a prompt of exactly
`input_len` random token ids (sent as a list of ids) asking for exactly `output_len` tokens (greedy,
`ignore_eos`), at most `concurrency` in flight at once. Measured on the client: time to first token, the gaps
between streamed chunks (inter-token latency), end-to-end latency, and throughputs over the level's wall time.
Token counts are the server's `usage` (last stream chunk) when it sends one, else the chunks counted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from quickmoe.errors import ConfigError

__all__ = ["RequestResult", "ServeBenchOptions", "format_level", "run_serve_bench", "summarize"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeBenchOptions:
    """`num_prompts` None: 4 x the concurrency (at least 8) per level. `token_range`: prompt ids are drawn from
    [lo, hi), ordinary tokens in every common vocabulary (no special tokens)."""

    base_url: str
    concurrency: tuple[int, ...] = (1, 4, 16, 32)
    model: str | None = None
    num_prompts: int | None = None
    input_len: int = 1000
    output_len: int = 1000
    result_json: str | None = None
    api_key: str | None = None
    seed: int = 0
    token_range: tuple[int, int] = (1000, 30000)
    timeout_s: float = 1800.0
    warmup: bool = True

    def __post_init__(self) -> None:
        def fail(name: str, expected: str) -> ConfigError:
            return ConfigError(f"bench serve option {name} = {getattr(self, name)!r}: expected {expected}")

        if not isinstance(self.base_url, str) or not self.base_url.startswith(("http://", "https://")):
            raise fail("base_url", "an http:// or https:// URL such as http://127.0.0.1:8000")
        if not self.concurrency or any(not isinstance(c, int) or c < 1 for c in self.concurrency):
            raise fail("concurrency", "one or more integers >= 1, e.g. 1,4,16,32")
        if self.num_prompts is not None and self.num_prompts < 1:
            raise fail("num_prompts", "an integer >= 1")
        if self.input_len < 1:
            raise fail("input_len", "an integer >= 1")
        if self.output_len < 1:
            raise fail("output_len", "an integer >= 1")
        lo, hi = self.token_range
        if not 0 <= lo < hi:
            raise fail("token_range", "0 <= lo < hi")
        if not self.timeout_s > 0:
            raise fail("timeout_s", "a number of seconds > 0")

    @property
    def root(self) -> str:
        """The base URL without a trailing / or /v1."""
        url = self.base_url.rstrip("/")
        return url[:-3] if url.endswith("/v1") else url

    def prompts_for(self, concurrency: int) -> int:
        return self.num_prompts if self.num_prompts is not None else max(4 * concurrency, 8)


@dataclass
class RequestResult:
    ok: bool = False
    error: str | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft: float | None = None
    itl: list[float] = field(default_factory=list)
    latency: float = 0.0


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


async def _sse_lines(response):
    """The lines of an event stream as the SSE specification cuts them (at CR, LF or CRLF only: a JSON string
    may hold U+2028 and the like, which splitlines-style decoders would cut at)."""
    pending = b""
    async for chunk in response.aiter_bytes():
        pending += chunk
        *lines, pending = pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        for line in lines:
            yield line.decode("utf-8")
    if pending:
        yield pending.decode("utf-8")


async def _one_request(client, url: str, payload: dict[str, Any], headers: dict[str, str],
                       input_len: int) -> RequestResult:
    result = RequestResult()
    start = last = time.perf_counter()
    chunks = 0
    usage = None
    try:
        async with client.stream("POST", url, json=payload, headers=headers) as response:
            if response.status_code != 200:
                body = (await response.aread()).decode(errors="replace")
                result.error = f"HTTP {response.status_code}: {body[:300]}"
                return result
            async for line in _sse_lines(response):
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                message = json.loads(data)
                if "error" in message:
                    result.error = f"error event: {json.dumps(message['error'])[:300]}"
                    return result
                now = time.perf_counter()
                choices = message.get("choices") or []
                if choices and (choices[0].get("text") or choices[0].get("delta", {}).get("content")):
                    if result.ttft is None:
                        result.ttft = now - start
                    else:
                        result.itl.append(now - last)
                    last = now
                    chunks += 1
                if message.get("usage"):
                    usage = message["usage"]
    except Exception as exc:  # any transport failure is this request's failure, reported, not the run's
        result.error = f"{type(exc).__name__}: {exc}"
        return result
    result.latency = time.perf_counter() - start
    result.prompt_tokens = int(usage["prompt_tokens"]) if usage else input_len
    result.output_tokens = int(usage["completion_tokens"]) if usage else chunks
    result.ok = result.ttft is not None
    if not result.ok:
        result.error = "the stream ended without any text"
    return result


def summarize(results: list[RequestResult], duration: float, concurrency: int) -> dict[str, Any]:
    """The level's figures: counts, throughputs, TTFT / ITL / TPOT / E2E statistics in milliseconds."""
    good = [r for r in results if r.ok]
    ms = 1000.0
    ttft = [r.ttft * ms for r in good]
    itl = [gap * ms for r in good for gap in r.itl]
    tpot = [(r.latency - r.ttft) * ms / (r.output_tokens - 1) for r in good if r.output_tokens > 1]
    e2e = [r.latency * ms for r in good]
    input_tokens = sum(r.prompt_tokens for r in good)
    output_tokens = sum(r.output_tokens for r in good)
    duration = max(duration, 1e-9)
    return {
        "concurrency": concurrency, "successful_requests": len(good), "failed_requests": len(results) - len(good),
        "duration_s": duration, "total_input_tokens": input_tokens, "total_output_tokens": output_tokens,
        "request_throughput": len(good) / duration, "input_throughput": input_tokens / duration,
        "output_throughput": output_tokens / duration,
        "total_token_throughput": (input_tokens + output_tokens) / duration,
        "mean_ttft_ms": _mean(ttft), "median_ttft_ms": percentile(ttft, 50), "p99_ttft_ms": percentile(ttft, 99),
        "mean_itl_ms": _mean(itl), "median_itl_ms": percentile(itl, 50), "p95_itl_ms": percentile(itl, 95),
        "p99_itl_ms": percentile(itl, 99), "max_itl_ms": max(itl) if itl else math.nan,
        "mean_tpot_ms": _mean(tpot), "median_tpot_ms": percentile(tpot, 50),
        "mean_e2e_ms": _mean(e2e), "median_e2e_ms": percentile(e2e, 50),
        "errors": sorted({r.error for r in results if r.error})[:5],
    }


_ROWS = [("Successful requests", "successful_requests", "d"), ("Failed requests", "failed_requests", "d"),
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


def _overview(summaries: list[dict[str, Any]]) -> str:
    head = (f"{'conc':>5} {'ok':>5} {'fail':>5} {'req/s':>8} {'out tok/s':>10} {'tot tok/s':>10} "
            f"{'TTFT med':>9} {'TTFT p99':>9} {'ITL med':>8} {'ITL p99':>8} {'E2E med':>9}  (ms)")
    rows = [f"{s['concurrency']:>5} {s['successful_requests']:>5} {s['failed_requests']:>5} "
            f"{s['request_throughput']:>8.2f} {s['output_throughput']:>10.1f} {s['total_token_throughput']:>10.1f} "
            f"{s['median_ttft_ms']:>9.1f} {s['p99_ttft_ms']:>9.1f} {s['median_itl_ms']:>8.2f} "
            f"{s['p99_itl_ms']:>8.2f} {s['median_e2e_ms']:>9.1f}" for s in summaries]
    return "\n".join([head] + rows)


async def _discover_model(client, root: str, headers: dict[str, str]) -> str:
    response = await client.get(f"{root}/v1/models", headers=headers)
    if response.status_code != 200:
        raise ConfigError(f"GET {root}/v1/models answered {response.status_code} ({response.text[:200]}); "
                          "pass --model")
    data = response.json().get("data") or []
    if not data:
        raise ConfigError(f"{root}/v1/models lists no model; pass --model")
    return str(data[0]["id"])


async def _run(options: ServeBenchOptions) -> dict[str, Any]:
    import httpx

    logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger().level))  # no line per request
    headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else {}
    limits = httpx.Limits(max_connections=max(options.concurrency) + 4, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=httpx.Timeout(options.timeout_s, connect=30.0), limits=limits,
                                 trust_env=False) as client:
        try:
            model = options.model or await _discover_model(client, options.root, headers)
        except httpx.HTTPError as exc:
            raise ConfigError(f"cannot reach {options.root} ({type(exc).__name__}: {exc})") from None
        url = f"{options.root}/v1/completions"
        rng = random.Random(options.seed)
        lo, hi = options.token_range

        def payload(output_len: int) -> dict[str, Any]:
            return {"model": model, "prompt": [rng.randrange(lo, hi) for _ in range(options.input_len)],
                    "max_tokens": output_len, "temperature": 0.0, "ignore_eos": True, "stream": True,
                    "stream_options": {"include_usage": True}}

        if options.warmup:
            warm = await _one_request(client, url, payload(min(options.output_len, 16)), headers, options.input_len)
            if not warm.ok:
                raise ConfigError(f"the warm-up request to {url} failed: {warm.error}")
        summaries = []
        for concurrency in options.concurrency:
            gate = asyncio.Semaphore(concurrency)
            bodies = [payload(options.output_len) for _ in range(options.prompts_for(concurrency))]

            async def limited(body: dict[str, Any]) -> RequestResult:
                async with gate:
                    return await _one_request(client, url, body, headers, options.input_len)

            start = time.perf_counter()
            results = await asyncio.gather(*(limited(b) for b in bodies))
            summary = summarize(list(results), time.perf_counter() - start, concurrency)
            print(format_level(summary), flush=True)
            summaries.append(summary)
    print(_overview(summaries), flush=True)
    return {"base_url": options.root, "model": model, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "options": {k: v for k, v in asdict(options).items() if k != "api_key"}, "results": summaries}


def run_serve_bench(options: ServeBenchOptions) -> dict[str, Any]:
    """Run every concurrency level, print each level's table and an overview, write `result_json`."""
    report = asyncio.run(_run(options))
    if options.result_json:
        Path(options.result_json).write_text(json.dumps(_json_safe(report), indent=2) + "\n")
        logger.info("wrote %s", options.result_json)
    return report


def _json_safe(value: Any) -> Any:
    """NaN (a statistic of no values) as null: JSON has no NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value
