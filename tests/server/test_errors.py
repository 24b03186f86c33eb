"""Every client mistake gets its status and an OpenAI-style error body naming the field, and the server keeps
serving: malformed JSON, wrong types and values, unsupported fields, an unknown model, a context overflow,
a missing or wrong API key, an unknown route."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from .conftest import API_KEY, MAX_MODEL_LEN, MODEL

OK_COMPLETION = {"model": MODEL, "prompt": "Hello", "max_tokens": 2, "temperature": 0}
OK_CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0}

# (path, body, param the error must name, code); bodies are changes to OK_COMPLETION / OK_CHAT
INVALID = [
    ("completions", {"max_tokens": "5"}, "max_tokens", "invalid_value"),
    ("completions", {"max_tokens": 0}, "max_tokens", "unsupported_value"),  # only with echo
    ("completions", {"max_tokens": 2.5}, "max_tokens", "invalid_value"),
    ("completions", {"temperature": "hot"}, "temperature", "invalid_value"),
    ("completions", {"temperature": -1}, "temperature", "invalid_value"),
    ("completions", {"top_p": 0}, "top_p", "invalid_value"),
    ("completions", {"top_p": 1.5}, "top_p", "invalid_value"),
    ("completions", {"top_k": -2}, "top_k", "invalid_value"),
    ("completions", {"seed": 2**70}, "seed", "invalid_value"),
    ("completions", {"seed": True}, "seed", "invalid_value"),
    ("completions", {"stop": [1, 2]}, "stop", "invalid_value"),
    ("completions", {"stop": ""}, "stop", "invalid_value"),
    ("completions", {"stream": "yes"}, "stream", "invalid_value"),
    ("completions", {"stream_options": {"include_usage": "yes"}}, "stream_options.include_usage", "invalid_value"),
    ("completions", {"logprobs": 21}, "logprobs", "invalid_value"),
    ("completions", {"prompt": 5}, "prompt", "invalid_value"),
    ("completions", {"prompt": ["a", 5]}, "prompt", "invalid_value"),
    ("completions", {"prompt": ["a"] * 257}, "prompt", "invalid_value"),
    ("completions", {"prompt": ["a", [10**12]]}, "prompt[1]", "invalid_value"),
    ("completions", {"prompt": ""}, "prompt", "invalid_value"),
    ("completions", {"prompt": [10**12]}, "prompt", "invalid_value"),
    ("completions", {"prompt": None}, "prompt", "invalid_value"),
    ("completions", {"n": 0}, "n", "invalid_value"),
    ("completions", {"n": 129}, "n", "invalid_value"),
    ("completions", {"best_of": 3}, "best_of", "unsupported_value"),
    ("completions", {"suffix": "x"}, "suffix", "unsupported_value"),
    ("completions", {"presence_penalty": 2.5}, "presence_penalty", "invalid_value"),
    ("completions", {"repetition_penalty": 0}, "repetition_penalty", "invalid_value"),
    ("completions", {"min_p": -0.1}, "min_p", "invalid_value"),
    ("completions", {"min_tokens": 3, "max_tokens": 2}, "min_tokens", "invalid_value"),
    ("completions", {"logit_bias": {"x": -100}}, "logit_bias", "invalid_value"),
    ("completions", {"logit_bias": {"5": 101}}, "logit_bias", "invalid_value"),
    ("completions", {"logit_bias": {str(10**9): 1}}, "logit_bias", "invalid_value"),
    ("completions", {"stop_token_ids": [3, 10**9]}, "stop_token_ids", "invalid_value"),
    ("completions", {"prompt_logprobs": 2, "stream": True}, "prompt_logprobs", "unsupported_value"),
    ("completions", {"guided_json": {"type": "object"}}, "guided_json", "unsupported_value"),
    ("completions", {"not_an_openai_field": 1}, "not_an_openai_field", "unsupported_value"),
    ("completions", {"model": "gpt-4"}, "model", "model_not_found"),
    ("completions", {"max_tokens": MAX_MODEL_LEN}, "max_tokens", "context_length_exceeded"),
    ("completions", {"prompt": [1000] * MAX_MODEL_LEN}, "prompt", "context_length_exceeded"),
    ("chat/completions", {"messages": "Hi"}, "messages", "invalid_value"),
    ("chat/completions", {"messages": []}, "messages", "invalid_value"),
    ("chat/completions", {"messages": [{"role": "function", "content": "x"}]}, "messages[0].role", "invalid_value"),
    ("chat/completions", {"messages": [{"role": "tool", "content": "x", "tool_call_id": "nope"}]}, "messages",
     "invalid_value"),
    ("chat/completions", {"messages": [{"role": "user", "content": 5}]}, "messages[0].content", "invalid_value"),
    ("chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
     "messages[0].content[0].type", "invalid_value"),
    ("chat/completions", {"messages": [{"content": "Hi"}]}, "messages[0].role", "missing"),
    ("chat/completions", {"reasoning_effort": "extreme"}, "reasoning_effort", "invalid_value"),
    ("chat/completions", {"logprobs": 1}, "logprobs", "invalid_value"),
    ("chat/completions", {"top_logprobs": 3}, "top_logprobs", "unsupported_value"),
    ("chat/completions", {"logprobs": True, "top_logprobs": 30}, "top_logprobs", "invalid_value"),
    ("chat/completions", {"tools": [{"type": "function", "function": {"name": "bad name"}}]},
     "tools[0].function.name", "invalid_value"),
    ("chat/completions", {"tools": [{"type": "function", "function": {"name": "f"}}],
                          "tool_choice": {"type": "function", "function": {"name": "g"}}}, "tool_choice",
     "unsupported_value"),
    ("chat/completions", {"tool_choice": "required"}, "tool_choice", "unsupported_value"),
    ("chat/completions", {"max_completion_tokens": MAX_MODEL_LEN}, "max_completion_tokens",
     "context_length_exceeded"),
    ("chat/completions", {"messages": [{"role": "user", "content": "word " * MAX_MODEL_LEN}]}, "messages",
     "context_length_exceeded"),
]


def _assert_error(response: httpx.Response, status: int, type_: str, param: str | None, code: str | None) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    error = body["error"]
    assert (error["type"], error["param"], error["code"]) == (type_, param, code), body
    assert isinstance(error["message"], str) and error["message"]
    return error["message"]


@pytest.mark.parametrize("path,change,param,code", INVALID,
                         ids=[f"{p}-{sorted(c)[0]}-{i}" for i, (p, c, _, _) in enumerate(INVALID)])
def test_invalid_fields_are_400_naming_the_field(http, path, change, param, code):
    body = {**(OK_CHAT if path.startswith("chat") else OK_COMPLETION), **change}
    message = _assert_error(http.post(f"/v1/{path}", json=body), 400, "invalid_request_error", param, code)
    assert param.split("[")[0].split(".")[0] in message


@pytest.mark.parametrize("raw", [b"{bad json", b"", b"[1, 2]", b'"text"', b"\xff\xfe", b"[" * 100000 + b"]" * 100000])
def test_malformed_json_is_400(http, raw):
    response = http.post("/v1/completions", content=raw, headers={"Content-Type": "application/json"})
    _assert_error(response, 400, "invalid_request_error", None, "invalid_json")


def test_the_server_keeps_serving_after_refusals_and_takes_identifiers(http):
    for path, change, _, _ in INVALID[:5] + INVALID[-20:]:
        http.post(f"/v1/{path}", json={**OK_COMPLETION, **change})
    response = http.post("/v1/completions", json={**OK_COMPLETION, "user": "u1"})
    assert response.status_code == 200 and response.json()["usage"]["completion_tokens"] == 2
    response = http.post("/v1/chat/completions", json=OK_CHAT)
    assert response.status_code == 200 and response.json()["choices"][0]["message"]["role"] == "assistant"


def test_a_missing_or_wrong_api_key_is_401(server):
    with httpx.Client(base_url=server.url, timeout=30, trust_env=False) as bare:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": API_KEY},
                        {"Authorization": f"Basic {API_KEY}"}):
            for method, path in (("POST", "/v1/completions"), ("POST", "/v1/chat/completions"), ("GET", "/v1/models")):
                response = bare.request(method, path, json=OK_COMPLETION, headers=headers)
                _assert_error(response, 401, "authentication_error", None, "invalid_api_key")
        assert bare.get("/health").status_code == 200  # probes and scrapes need no key
        assert bare.get("/metrics").status_code == 200
        ok = bare.post("/v1/completions", json=OK_COMPLETION, headers={"Authorization": f"Bearer {API_KEY}"})
        assert ok.status_code == 200


def test_unknown_routes_and_methods_answer_in_the_openai_shape(http):
    _assert_error(http.get("/v1/nothing"), 404, "not_found_error", None, None)
    _assert_error(http.get("/v1/completions"), 405, "invalid_request_error", None, None)
    _assert_error(http.get("/v1/models/other-model"), 404, "not_found_error", "model", "model_not_found")


LONE_SURROGATES = [
    ("chat/completions", {"messages": [{"role": "user", "content": "a\ud800b"}]}),
    ("chat/completions", {"messages": [{"role": "system", "content": "\udfff"}, {"role": "user", "content": "x"}]}),
    ("chat/completions", {"messages": [{"role": "user", "content": [{"type": "text", "text": "\ud83d"}]}]}),
    ("chat/completions", {"stop": ["\ud800"]}),
    ("completions", {"prompt": "a\ud800b"}),
    ("completions", {"stop": "\udc00"}),
]


@pytest.mark.parametrize("path, change", LONE_SURROGATES)
def test_lone_surrogates_are_replaced_as_the_tokenizer_does(http, server, path, change):
    """A lone surrogate (valid JSON, not encodable as UTF-8) is taken as U+FFFD, as the tokenizer takes it: the
    prompt is the one of the text with U+FFFD in its place, and the answer is 200, never a 5xx."""
    body = {**(OK_CHAT if path.startswith("chat") else OK_COMPLETION), **change}
    raw = json.dumps(body)  # ASCII-escaped: "\ud800" stays a lone surrogate on the wire
    response = http.post(f"/v1/{path}", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    replaced = json.loads(re.sub(r"\\ud[89a-f][0-9a-f]{2}", r"\\ufffd", raw))
    tokenizer = server.llm.tokenizer
    expected = (tokenizer.render_chat(replaced["messages"]) if path.startswith("chat")
                else tokenizer.encode(replaced["prompt"]))
    assert response.json()["usage"]["prompt_tokens"] == len(expected)
