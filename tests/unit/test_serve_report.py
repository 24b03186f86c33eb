"""`bench serve`'s figures from the client's per-request records: the overview line's TPOT and ITL columns against
a plain computation over random requests."""

from __future__ import annotations

import random
import statistics

from quickmoe.bench.serve_report import RequestResult, overview, summarize


def test_the_overview_line_carries_the_median_tpot_and_itl():
    rng = random.Random()
    results = []
    for _ in range(rng.randrange(20, 40)):
        n = rng.randrange(2, 50)
        ttft = rng.uniform(0.05, 2.0)
        itl = [rng.uniform(0.0, 0.1) for _ in range(rng.randrange(1, n))]  # chunks: fewer than tokens
        results.append(RequestResult(ok=True, prompt_tokens=100, output_tokens=n, ttft=ttft, itl=itl,
                                     latency=ttft + sum(itl)))
    results.append(RequestResult(ok=False, error="boom"))
    summary = summarize(results, duration=10.0, concurrency=8)
    good = results[:-1]
    tpot = statistics.median((r.latency - r.ttft) * 1e3 / (r.output_tokens - 1) for r in good)
    itl = statistics.median(g * 1e3 for r in good for g in r.itl)
    line = overview([summary]).splitlines()
    assert line[0].split()[-2:] == ["med", "(ms)"] and "TPOT med" in line[0]
    fields = line[1].split()
    assert fields[:3] == ["8", str(len(good)), "1"]
    assert abs(float(fields[-1]) - tpot) < 0.006 and abs(float(fields[8]) - itl) < 0.006
