"""Fuzz over the request schemas: a few hundred bodies mixing valid values and wrong types, out-of-range numbers,
junk structures and missing fields, for both endpoints, streamed or not. The server never answers 5xx, every
error has the OpenAI shape, every success is complete and respects the request (at most max_tokens tokens, no
stop string in a completion's text, as many logprobs as asked), and it still serves afterwards. Seeded
(derandomize) so that CI runs the same cases every time."""

from __future__ import annotations

import json
import tempfile

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from quickmoe.server.config import ServerConfig

from .conftest import ServerThread

MODEL = "fuzz"
MAX_MODEL_LEN = 128  # small_llm's
set_hypothesis_home_dir(tempfile.mkdtemp(prefix="quickmoe-hypothesis-"))  # its caches stay out of the repository

junk = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=12),
                 st.lists(st.integers(-5, 300000), max_size=4), st.dictionaries(st.text(max_size=4), st.integers(),
                                                                                 max_size=2))


COMMON = {
    "model": st.just(MODEL),
    "temperature": st.floats(0, 3),
    "top_p": st.floats(0, 1),
    "top_k": st.integers(-1, 250000),
    "n": st.just(1),
    "stop": st.one_of(st.text(max_size=4), st.lists(st.text(max_size=4), max_size=3)),
    "seed": st.integers(-(2**63), 2**64),
    "stream": st.booleans(),
    "stream_options": st.fixed_dictionaries({}, optional={"include_usage": st.booleans(),
                                                          "continuous_usage_stats": st.booleans()}),
    "user": st.text(max_size=8),
    "ignore_eos": st.booleans(),
    "stop_token_ids": st.lists(st.integers(0, 201087), max_size=3),
    "presence_penalty": st.just(0),
    "include_stop_str_in_output": st.booleans(),
}
token_ids = st.lists(st.integers(0, 201100), min_size=0, max_size=12)
COMPLETION = {**COMMON, "logprobs": st.integers(0, 21), "echo": st.just(False), "skip_special_tokens": st.booleans()}
part = st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=12)})
message = st.fixed_dictionaries({"role": st.sampled_from(["system", "developer", "user", "assistant"])},
                                optional={"content": st.one_of(st.text(max_size=30), st.lists(part, max_size=2)),
                                          "name": st.text(max_size=5)})
CHAT = {**COMMON, "max_completion_tokens": st.integers(1, 3), "reasoning_effort": st.sampled_from(["low", "high"]),
        "logprobs": st.booleans(), "top_logprobs": st.integers(0, 21), "tool_choice": st.just("auto"),
        "response_format": st.just({"type": "text"})}
REQUIRED = {
    "/v1/completions": {"prompt": st.one_of(st.text(max_size=40), token_ids, st.lists(st.text(max_size=10),
                                                                                         max_size=2)),
                        "max_tokens": st.integers(1, 3), "stream": st.booleans()},
    "/v1/chat/completions": {"messages": st.lists(message, min_size=1, max_size=3), "max_tokens": st.integers(1, 3),
                             "stream": st.booleans()},
}


@st.composite
def requests(draw) -> tuple[str, dict]:
    """A body of valid values (the required fields and any optional ones), then up to two fields replaced by
    junk or dropped, so that both the validation and the generation paths are exercised."""
    path = draw(st.sampled_from(sorted(REQUIRED)))
    optional = COMPLETION if path == "/v1/completions" else CHAT
    body = draw(st.fixed_dictionaries(REQUIRED[path], optional={k: v for k, v in optional.items()
                                                                if k not in REQUIRED[path]}))
    fields = sorted({**REQUIRED[path], **optional})
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):
        key = draw(st.sampled_from(fields))
        if draw(st.booleans()):
            body[key] = draw(junk)
        else:
            body.pop(key, None)
    return path, body


@pytest.fixture(scope="module")
def fuzz_server(small_llm):
    running = ServerThread(small_llm, ServerConfig(port=0, served_model_name=MODEL))
    yield running
    running.stop()


def _respects(request: dict, texts: list[str], completion_tokens: int | None, logprob_counts: list[int]) -> None:
    """What a successful answer owes the request it was given (one text per choice: one per prompt)."""
    default = 16 if "prompt" in request else MAX_MODEL_LEN  # completions: 16; chat: what the context leaves
    limit = request.get("max_completion_tokens") or request.get("max_tokens") or default
    prompts = request.get("prompt")
    num_choices = len(prompts) if isinstance(prompts, list) and prompts and isinstance(prompts[0], str) else 1
    if completion_tokens is not None:
        assert 1 <= completion_tokens <= limit * num_choices
    stops = [request["stop"]] if isinstance(request.get("stop"), str) else request.get("stop") or []
    if "prompt" in request and not request.get("include_stop_str_in_output"):
        assert not any(s in text for s in stops for text in texts), (texts, stops)
    asked = request.get("top_logprobs", 0) if request.get("logprobs") is True else request.get("logprobs")
    if isinstance(asked, int) and not isinstance(asked, bool) and "prompt" in request:
        # the legacy completions format keys top_logprobs by token text: tokens decoding to the same text (e.g. the
        # bytes of one character, each shown as U+FFFD) share an entry, so a row may hold fewer than asked
        assert all(min(1, asked) <= n <= asked for n in logprob_counts), (logprob_counts, asked)


def _check(response: httpx.Response, streamed: bool, request: dict) -> None:
    if response.status_code != 200 or not streamed:
        response.read()
    assert response.status_code < 500, response.text
    if response.status_code != 200:
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["message"]
        return
    if not streamed:
        body = response.json()
        assert all(c["finish_reason"] in ("stop", "length") for c in body["choices"])
        assert body["usage"]["total_tokens"] > 0
        texts = [c.get("text", (c.get("message") or {}).get("content") or "") for c in body["choices"]]
        counts = [len(top) for c in body["choices"] for top in (c.get("logprobs") or {}).get("top_logprobs") or []]
        _respects(request, texts, body["usage"]["completion_tokens"], counts)
        return
    events = [line[5:].strip() for line in response.iter_lines() if line.startswith("data:")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all("error" not in c for c in chunks), events
    texts: dict[int, str] = {}
    for c in chunks:
        for choice in c["choices"]:
            texts[choice["index"]] = texts.get(choice["index"], "") + choice.get("text", "")
    usage = next((c["usage"] for c in reversed(chunks) if c.get("usage")), None)
    counts = [len(top) for c in chunks if c["choices"] and c["choices"][0].get("logprobs")
              for top in c["choices"][0]["logprobs"].get("top_logprobs") or []]
    _respects(request, list(texts.values()), usage["completion_tokens"] if usage else None, counts)


def test_fuzzed_requests_never_get_a_5xx(fuzz_server):
    with httpx.Client(base_url=fuzz_server.url, timeout=60, trust_env=False) as http:

        @settings(max_examples=200, deadline=None, database=None, derandomize=True,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(requests())
        def one(request):
            path, body = request
            streamed = body.get("stream") is True
            raw = json.dumps(body)  # NaN and Infinity included, as JavaScript clients may send them
            with http.stream("POST", path, content=raw, headers={"Content-Type": "application/json"}) as response:
                _check(response, streamed, body)

        one()
        ok = http.post("/v1/completions", json={"model": MODEL, "prompt": "still serving", "max_tokens": 2})
        assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 2
        assert fuzz_server.llm.engine.blocks.num_sequences == 0
