"""What an operator reads: /metrics in Prometheus' format under vLLM's stems (the exposition parses, the prefix
cache counters move with a repeated prompt), the periodic stats line and request logs, /version, /tokenize and
/detokenize."""

from __future__ import annotations

import logging
import random

from prometheus_client.parser import text_string_to_metric_families

from quickmoe import __version__
from quickmoe.server.metrics import EngineSnapshot
from quickmoe.server.stats_log import StatsLogger

from .conftest import MODEL, metric_values

STEMS = ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc", "prompt_tokens",
         "generation_tokens", "time_to_first_token_seconds", "inter_token_latency_seconds",
         "e2e_request_latency_seconds", "request_queue_time_seconds", "prefix_cache_hits", "prefix_cache_queries",
         "num_preemptions", "request_success")


def test_metrics_parse_with_vllm_stems_and_count_prefix_cache_hits(http, server):
    words = ["alpha", "beta", "gamma", "delta", "mixture", "expert"]
    prompt = " ".join(random.choice(words) for _ in range(80))  # > 4 blocks of 16 tokens
    n_prompt = len(server.serving.tokenizer.encode(prompt))
    families = {f.name: f for f in text_string_to_metric_families(http.get("/metrics").text)}
    assert {"quickmoe:" + stem for stem in STEMS} <= set(families)

    def hits() -> float:
        return metric_values(http.get("/metrics").text, "quickmoe:prefix_cache_hits_total")['{model_name="tiny"}']

    body = {"model": MODEL, "prompt": prompt, "max_tokens": 1, "temperature": 0}
    assert http.post("/v1/completions", json=body).status_code == 200
    before = hits()
    assert http.post("/v1/completions", json=body).status_code == 200
    assert hits() - before == (n_prompt - 1) // 16 * 16  # every full block of the prompt but the last token's


def test_the_step_counters_count_a_request_s_steps_and_bench_serve_reads_them(http, server):
    """/metrics carries the engine's step counters; a greedy request of P prompt tokens and N output tokens adds
    P + N - 1 tokens or one more (a step may run one token past the end) to them, and bench serve's parser reads
    the same sums; a page without them (another server) gives None."""
    from quickmoe.bench.serve_steps import level_steps, parse_step_counters

    before = parse_step_counters(http.get("/metrics").text)
    n_prompt, n_out = random.randint(5, 40), random.randint(3, 9)
    body = {"model": MODEL, "prompt": [random.randrange(100, 1000) for _ in range(n_prompt)], "max_tokens": n_out,
            "temperature": 0, "ignore_eos": True}
    assert http.post("/v1/completions", json=body).status_code == 200
    after = parse_step_counters(http.get("/metrics").text)
    level = level_steps(before, after)
    computed = sum(k["tokens"] for k in level["by_kind"].values())
    assert n_prompt + n_out - 1 <= computed <= n_prompt + n_out, level
    assert level["by_kind"]["decode"]["steps"] >= n_out - 2 and level["by_kind"]["decode"]["tokens_per_step"] == 1
    text = http.get("/metrics").text
    decode_steps = metric_values(text, "quickmoe:engine_steps_total")['{kind="decode",model_name="tiny"}']
    assert decode_steps == parse_step_counters(text)["steps"]["decode"] >= after["steps"]["decode"]
    assert after["idle_s"] >= before["idle_s"] and after["host_s"] > before["host_s"]
    assert parse_step_counters("# TYPE other_total counter\nother_total 3.0\n") is None
    assert level_steps(None, after) is None


def test_version_tokenize_and_detokenize(http, server):
    assert http.get("/version").json() == {"version": __version__}
    tok = server.serving.tokenizer
    text = "Tokenize this, é 日本"
    got = http.post("/tokenize", json={"model": MODEL, "prompt": text}).json()
    assert got["tokens"] == tok.encode(text) and got["count"] == len(got["tokens"]) and got["max_model_len"] == 256
    assert http.post("/detokenize", json={"tokens": got["tokens"]}).json() == {"prompt": text}
    chat = http.post("/tokenize", json={"messages": [{"role": "user", "content": "Hi"}]}).json()
    assert chat["tokens"] == tok.render_chat([{"role": "user", "content": "Hi"}])
    for body, param in (({"prompt": "x", "messages": [{"role": "user", "content": "Hi"}]}, None),
                        ({"tokens": [-1]}, "tokens"), ({"prompt": "x", "extra": 1}, "extra")):
        path = "/detokenize" if "tokens" in body else "/tokenize"
        response = http.post(path, json=body)
        assert response.status_code == 400
        if param:
            assert response.json()["error"]["param"] == param
    assert http.post("/tokenize", json={"prompt": "x"}, headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_the_stats_line_reports_the_interval(caplog):
    stats = StatsLogger(interval_s=1e-9)
    stats.count_generated(50)
    snap = EngineSnapshot(num_running=3, num_waiting=2, kv_cache_usage=(("full", 0.25), ("sliding_128", 0.5)),
                          num_prefix_queries=200, num_prefix_hits=150, num_scheduled_tokens=250)
    assert stats.line(snap, 2.0) == ("Avg prompt throughput: 100.0 tokens/s, Avg generation throughput: 25.0 tokens/s, "
                                     "Running: 3 reqs, Waiting: 2 reqs, KV cache usage: 50.0%, Prefix cache hit rate: "
                                     "75.0%")
    with caplog.at_level(logging.INFO, logger="quickmoe.server.stats"):
        stats.maybe_log(snap)
    assert "Prefix cache hit rate: 75.0%" in caplog.text
    assert "Running: 0 reqs" in stats.line(EngineSnapshot(num_scheduled_tokens=250), 1.0)  # a fresh interval
