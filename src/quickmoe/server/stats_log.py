"""The periodic one-line stats log of a serving engine (as vLLM's): throughput, queue, KV cache and prefix cache.

    quickmoe.server.stats: Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: 1530.2 tokens/s,
    Running: 32 reqs, Waiting: 4 reqs, KV cache usage: 41.3%, Prefix cache hit rate: 62.5%

Written from the engine thread after a step when `interval_s` has passed since the last line (so an idle server
stays quiet); the rates are over that interval, the hit rate over the prompt tokens looked up in it.
"""

from __future__ import annotations

import logging
import time

from quickmoe.server.metrics import EngineSnapshot

__all__ = ["StatsLogger"]

logger = logging.getLogger("quickmoe.server.stats")


class StatsLogger:
    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._last_time = time.monotonic()
        self._last = EngineSnapshot()
        self._generated = 0  # tokens generated since the last line

    def count_generated(self, tokens: int) -> None:
        self._generated += tokens

    def line(self, snap: EngineSnapshot, seconds: float) -> str:
        """The line for the interval ending at `snap` (`seconds` long)."""
        computed = snap.num_scheduled_tokens - self._last.num_scheduled_tokens
        queries = snap.num_prefix_queries - self._last.num_prefix_queries
        hits = snap.num_prefix_hits - self._last.num_prefix_hits
        usage = max((u for _, u in snap.kv_cache_usage), default=0.0)
        prompt = max(computed - self._generated, 0)  # tokens computed beyond one per generated token
        return (f"Avg prompt throughput: {prompt / seconds:.1f} tokens/s, Avg generation throughput: "
                f"{self._generated / seconds:.1f} tokens/s, Running: {snap.num_running} reqs, Waiting: "
                f"{snap.num_waiting} reqs, KV cache usage: {100 * usage:.1f}%, Prefix cache hit rate: "
                f"{100 * hits / queries if queries else 0.0:.1f}%")

    def maybe_log(self, snap: EngineSnapshot) -> None:
        now = time.monotonic()
        if now - self._last_time < self.interval_s:
            return
        logger.info("%s", self.line(snap, now - self._last_time))
        self._last_time, self._last, self._generated = now, snap, 0
