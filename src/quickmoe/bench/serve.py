"""`quickmoe bench serve`: a load generator for any OpenAI-compatible server.

For each concurrency level, `num_prompts` streamed /v1/completions requests (or, with `duration_s`, as many as
start within that time), each a prompt of exactly `input_len` random token ids (sent as a list of ids; or a length
drawn uniformly from `input_len_range`) asking for exactly `output_len` tokens (or from `output_len_range`; greedy,
`ignore_eos`), at most `concurrency` in flight at once. `disconnect_fraction` of the requests are cut by the client
after a random number of chunks (a soak's misbehaving clients); those and 503 answers are counted apart. Measured on the client: time to first token, the gaps
between streamed chunks (inter-token latency), end-to-end latency, and throughputs over the level's wall time.
Token counts are the server's `usage` (last stream chunk) when it sends one, else the chunks counted. A quickmoe
server's step counters on /metrics, read before and after each level, add the server's view (bench/serve_steps.py:
device time per step kind, the device's idle share); the client's own CPU use is reported too (a client near one
full core would cap what it measures).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from quickmoe.bench.serve_report import RequestResult, format_level, overview, summarize
from quickmoe.bench.serve_profile import profile_level, profile_line
from quickmoe.bench.serve_steps import level_steps, scrape_step_counters, steps_line
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
    input_len_range: tuple[int, int] | None = None
    output_len_range: tuple[int, int] | None = None
    disconnect_fraction: float = 0.0
    duration_s: float | None = None
    shared_prefix_len: int = 0  # every prompt starts with the same this many random ids (a shared system prompt)
    op_family_steps: int = 0  # > 0: the server's step profile of this many steps per level (bench/serve_profile.py)

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
        if not isinstance(self.shared_prefix_len, int) or self.shared_prefix_len < 0:
            raise fail("shared_prefix_len", "an integer >= 0")
        if self.output_len < 1:
            raise fail("output_len", "an integer >= 1")
        lo, hi = self.token_range
        if not 0 <= lo < hi:
            raise fail("token_range", "0 <= lo < hi")
        if not self.timeout_s > 0:
            raise fail("timeout_s", "a number of seconds > 0")
        for name in ("input_len_range", "output_len_range"):
            span = getattr(self, name)
            if span is not None and (len(span) != 2 or not 1 <= span[0] <= span[1]):
                raise fail(name, "LO,HI with 1 <= LO <= HI")
        if not 0 <= self.disconnect_fraction < 1:
            raise fail("disconnect_fraction", "a fraction in [0, 1)")
        if self.duration_s is not None and not 0 < self.duration_s < float("inf"):
            raise fail("duration_s", "None or a number of seconds > 0")
        if not isinstance(self.op_family_steps, int) or not 0 <= self.op_family_steps <= 64:
            raise fail("op_family_steps", "an integer in [0, 64] (0: no step profile)")

    @property
    def root(self) -> str:
        """The base URL without a trailing / or /v1."""
        url = self.base_url.rstrip("/")
        return url[:-3] if url.endswith("/v1") else url

    def prompts_for(self, concurrency: int) -> int:
        return self.num_prompts if self.num_prompts is not None else max(4 * concurrency, 8)


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


async def _one_request(client, url: str, payload: dict[str, Any], headers: dict[str, str], input_len: int,
                       disconnect_after: int | None = None) -> RequestResult:
    """One streamed request; with `disconnect_after`, the client closes the connection after that many chunks."""
    result = RequestResult()
    start = last = time.perf_counter()
    chunks = 0
    usage = None
    try:
        async with client.stream("POST", url, json=payload, headers=headers) as response:
            if response.status_code != 200:
                body = (await response.aread()).decode(errors="replace")
                result.error = f"HTTP {response.status_code}: {body[:300]}"
                result.rejected = response.status_code == 503
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
                    if disconnect_after is not None and chunks >= disconnect_after:
                        result.disconnected = True  # leaving the block closes the connection mid-stream
                        break
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
        shared = [rng.randrange(lo, hi) for _ in range(options.shared_prefix_len)]

        def payload(input_len: int, output_len: int) -> dict[str, Any]:
            return {"model": model, "prompt": shared + [rng.randrange(lo, hi) for _ in range(input_len)],
                    "max_tokens": output_len, "temperature": 0.0, "ignore_eos": True, "stream": True,
                    "stream_options": {"include_usage": True}}

        def draw() -> tuple[dict[str, Any], int, int | None]:
            """The next request: its body, prompt length and, for a client that will leave, after how many chunks."""
            n_in = rng.randint(*options.input_len_range) if options.input_len_range else options.input_len
            n_out = rng.randint(*options.output_len_range) if options.output_len_range else options.output_len
            leave = rng.randint(1, max(n_out - 1, 1)) if rng.random() < options.disconnect_fraction else None
            return payload(n_in, n_out), n_in + options.shared_prefix_len, leave

        if options.warmup:  # the shortest prompt asked for
            n_in = options.input_len_range[0] if options.input_len_range else options.input_len
            warm = await _one_request(client, url, payload(n_in, min(options.output_len, 16)), headers, n_in)
            if not warm.ok:
                raise ConfigError(f"the warm-up request to {url} failed: {warm.error}")
        summaries = []
        profile_steps = options.op_family_steps
        for concurrency in options.concurrency:
            counters_before = await scrape_step_counters(client, options.root, headers)
            first_done = asyncio.Event()  # the level's first request finished: its load is on
            profile = asyncio.create_task(profile_level(client, options.root, headers, profile_steps, first_done)) \
                if profile_steps else None
            cpu_before = time.process_time()
            start = time.perf_counter()
            if options.duration_s is None:
                requests = [draw() for _ in range(options.prompts_for(concurrency))]
                gate = asyncio.Semaphore(concurrency)
                left = [len(requests)]

                async def limited(request: tuple[dict[str, Any], int, int | None]) -> RequestResult:
                    async with gate:
                        result = await _one_request(client, url, request[0], headers, request[1], request[2])
                    left[0] -= 1
                    if left[0]:  # others still run or wait: the server has work to profile
                        first_done.set()
                    return result

                results = list(await asyncio.gather(*(limited(r) for r in requests)))
            else:
                deadline = start + options.duration_s
                results = []

                async def worker() -> None:  # one of `concurrency` clients, each sending until the deadline
                    while time.perf_counter() < deadline:
                        body, n_in, leave = draw()
                        results.append(await _one_request(client, url, body, headers, n_in, leave))
                        first_done.set()

                await asyncio.gather(*(worker() for _ in range(concurrency)))
            summary = summarize(results, time.perf_counter() - start, concurrency)
            summary["client_cpu_fraction"] = (time.process_time() - cpu_before) / summary["duration_s"]
            summary["server_steps"] = level_steps(counters_before,
                                                  await scrape_step_counters(client, options.root, headers))
            if profile is not None and not first_done.is_set():  # no request ended while others ran
                profile.cancel()
                summary["server_op_families"] = {"error": "no request of the level finished while others ran"}
            elif profile is not None:
                summary["server_op_families"] = await profile
                if summary["server_op_families"].get("error", "").startswith("HTTP 404"):
                    profile_steps = 0  # not this server's: no more asking
            print(format_level(summary), flush=True)
            if profile is not None:
                print(profile_line(summary["server_op_families"]), flush=True)
            line = steps_line(summary["server_steps"])
            print(f"{line + chr(10) if line else ''}this client used {100 * summary['client_cpu_fraction']:.0f}% "
                  "of one CPU core", flush=True)
            summaries.append(summary)
    print(overview(summaries), flush=True)
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
