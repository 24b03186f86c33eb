"""A client that goes away mid-request aborts it: its KV blocks are freed at once (block manager and /metrics),
long before the request would have finished, and the server goes on serving."""

from __future__ import annotations

import httpx
import pytest

from .conftest import MODEL, metric_values, wait_until

LONG = 150  # tokens the abandoned requests ask for: ~3 s of decoding on a CPU


def _kv_metrics(http) -> tuple[dict[str, float], float, float]:
    text = http.get("/metrics").text
    usage = metric_values(text, "quickmoe:kv_cache_group_usage_perc")
    sequences = metric_values(text, "quickmoe:kv_cache_sequences")['{model_name="tiny"}']
    aborted = metric_values(text, "quickmoe:request_success_total").get('{finished_reason="abort",model_name="tiny"}',
                                                                        0.0)
    return usage, sequences, aborted


@pytest.mark.parametrize("endpoint", ["completions", "chat/completions"])
def test_closing_a_stream_frees_the_request(http, server, endpoint):
    blocks = server.llm.engine.blocks
    _, _, aborted_before = _kv_metrics(http)
    body = {"model": MODEL, "max_tokens": LONG, "stream": True, "temperature": 0, "ignore_eos": True}
    body.update({"prompt": "one two three " * 5} if endpoint == "completions" else
                {"messages": [{"role": "user", "content": "one two three " * 5}]})
    with http.stream("POST", f"/v1/{endpoint}", json=body) as response:
        assert response.status_code == 200
        lines = response.iter_lines()  # one iterator, kept open: ending its loop early would close the connection
        data = []
        while len(data) < 3:
            line = next(lines)
            if line.startswith("data:"):
                data.append(line)
        assert blocks.num_sequences == 1  # it holds KV blocks while it runs
        usage, sequences, _ = _kv_metrics(http)
        assert sequences == 1 and max(usage.values()) > 0
    # the client closed the connection after 3 chunks
    assert wait_until(lambda: blocks.num_sequences == 0, timeout=3.0)
    assert all(pool.num_free == pool.num_blocks for pool in blocks.pools.values())
    # /metrics reads the snapshot the engine thread publishes after its step: it may trail the blocks a moment
    assert wait_until(lambda: _kv_metrics(http)[1:] == (0, aborted_before + 1), timeout=3.0)
    usage, sequences, aborted = _kv_metrics(http)
    assert sequences == 0 and set(usage.values()) == {0.0}
    assert aborted == aborted_before + 1


def test_a_client_that_times_out_on_a_whole_response_frees_it(server, http):
    blocks = server.llm.engine.blocks
    _, _, aborted_before = _kv_metrics(http)
    body = {"model": MODEL, "prompt": "abandoned", "max_tokens": LONG, "temperature": 0, "ignore_eos": True}
    with httpx.Client(base_url=server.url, headers=http.headers, timeout=0.5, trust_env=False) as impatient:
        with pytest.raises(httpx.ReadTimeout):
            impatient.post("/v1/completions", json=body)
    assert wait_until(lambda: blocks.num_sequences == 0, timeout=2.0)
    assert wait_until(lambda: _kv_metrics(http)[1:] == (0, aborted_before + 1), timeout=3.0)  # published after
    _, sequences, aborted = _kv_metrics(http)
    assert sequences == 0 and aborted == aborted_before + 1  # stopped, not run to its end
    ok = http.post("/v1/completions", json={**body, "max_tokens": 2})
    assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 2
