"""The official `openai` client, unchanged, against the server over real HTTP: completions and chat, streamed and
whole; 16 concurrent greedy requests get exactly what each gets alone; chat splits harmony's analysis channel
into reasoning_content, never into content; metrics count what was served."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random

from quickmoe.tokenizer.vocab import CHANNEL, END, MESSAGE, RETURN, START

from .conftest import MODEL, metric_values
from .greedy import TOP, assert_same_greedy, chat_tokens, completion_tokens

GREEDY = dict(temperature=0, extra_body={"ignore_eos": True})


def _random_text(rng: random.Random) -> str:
    words = ["mixture", "of", "experts", "router", "token", "Paris", "é", "日本", "42", "the", "\n"]
    return " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))


def test_models_lists_the_served_model(client):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL


def test_completion_whole_and_streamed_agree(client, server):
    rng = random.Random()
    prompt = _random_text(rng)
    whole = client.completions.create(model=MODEL, prompt=prompt, max_tokens=7, logprobs=2, **GREEDY)
    choice = whole.choices[0]
    assert choice.finish_reason == "length"
    n_prompt = len(server.serving.tokenizer.encode(prompt))
    assert (whole.usage.prompt_tokens, whole.usage.completion_tokens, whole.usage.total_tokens) == (n_prompt, 7,
                                                                                                    n_prompt + 7)
    assert len(choice.logprobs.tokens) == len(choice.logprobs.token_logprobs) == 7
    assert all(len(top) <= 2 for top in choice.logprobs.top_logprobs)
    chunks = list(client.completions.create(model=MODEL, prompt=prompt, max_tokens=7, stream=True,
                                            stream_options={"include_usage": True}, **GREEDY))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == choice.text and text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 7
    assert all(c.usage is None for c in chunks[:-1])
    # a prompt of token ids is taken as given
    ids = [rng.randrange(1000, 100000) for _ in range(rng.randint(1, 20))]
    by_ids = client.completions.create(model=MODEL, prompt=ids, max_tokens=3, **GREEDY)
    assert by_ids.usage.prompt_tokens == len(ids)


def test_chat_whole_and_streamed_agree(client):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": _random_text(random.Random())}]
    whole = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=6, temperature=0)
    assert whole.choices[0].message.role == "assistant"
    assert whole.usage.completion_tokens <= 6 and whole.choices[0].finish_reason in ("length", "stop")
    chunks = list(client.chat.completions.create(model=MODEL, messages=messages, max_tokens=6, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == whole.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    # max_completion_tokens and content parts are understood
    parts = client.chat.completions.create(model=MODEL, max_completion_tokens=2, temperature=0, messages=[
        {"role": "user", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]}])
    plain = client.chat.completions.create(model=MODEL, max_tokens=2, temperature=0,
                                           messages=[{"role": "user", "content": "Hello"}])
    assert parts.choices[0].message.content == plain.choices[0].message.content
    assert parts.usage.completion_tokens <= 2


class ScriptedSampler:
    """The runner's sampler, except that requests whose seed is in `scripts` get the scripted tokens (then the last
    one again, or with `then_real` what the real sampler picks)."""

    def __init__(self, real, scripts: dict[int, list[int]], then_real: bool = False) -> None:
        self.real, self.scripts, self.position, self.then_real = real, scripts, {}, then_real

    def sample(self, logits, params, generators, *processing):
        out = self.real.sample(logits, params, generators, *processing)
        ids = out.token_ids.clone()  # on the device: the next step reads its input tokens there
        for row, p in enumerate(params):
            if p.seed in self.scripts:
                i = self.position.get(p.seed, 0)
                if i < len(self.scripts[p.seed]) or not self.then_real:
                    ids[row] = self.scripts[p.seed][min(i, len(self.scripts[p.seed]) - 1)]
                self.position[p.seed] = i + 1
        return dataclasses.replace(out, token_ids=ids)


def test_chat_reasoning_is_never_mixed_into_content(client, server, monkeypatch):
    tok = server.serving.tokenizer
    reasoning, answer = "Let me think: 2 + 2 is 4.", "The answer is 4."
    script = ([CHANNEL] + tok.encode("analysis") + [MESSAGE] + tok.encode(reasoning) + [END, START]
              + tok.encode("assistant") + [CHANNEL] + tok.encode("final") + [MESSAGE] + tok.encode(answer) + [RETURN])
    runner = server.llm.runner
    seeds = random.Random().sample(range(1, 10**9), 3)
    monkeypatch.setattr(runner, "sampler", ScriptedSampler(runner.sampler, {s: script for s in seeds}))
    messages = [{"role": "user", "content": "What is 2 + 2?"}]
    whole = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=100, seed=seeds[0])
    message = whole.choices[0].message
    assert (message.content, message.reasoning_content) == (answer, reasoning)
    assert whole.choices[0].finish_reason == "stop" and whole.usage.completion_tokens == len(script)
    chunks = list(client.chat.completions.create(model=MODEL, messages=messages, max_tokens=100, seed=seeds[1],
                                                 stream=True))
    deltas = [c.choices[0].delta for c in chunks]
    assert "".join(getattr(d, "reasoning_content", None) or "" for d in deltas) == reasoning
    assert "".join(d.content or "" for d in deltas) == answer
    assert all(not (d.content and "think" in d.content) for d in deltas)
    assert len([d for d in deltas if d.content]) > 3  # streamed token by token, not at the end
    # a stop string applies to the answer: it ends the reply there (the reasoning is left whole)
    stopped = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=100, seed=seeds[2],
                                             stop=["is 4"])
    assert stopped.choices[0].message.content == "The answer "
    assert stopped.choices[0].message.reasoning_content == reasoning
    assert stopped.choices[0].finish_reason == "stop"


def test_16_concurrent_requests_get_what_each_gets_alone(client, aclient, server):
    """Each request's greedy tokens in a batch of 16 are those it gets alone (tie-aware: tests/server/greedy.py),
    and where the tokens are the same, so is the text."""
    rng = random.Random()
    requests = []
    for i in range(16):
        max_tokens = rng.randint(3, 10)
        if i % 3 == 0:
            requests.append(("chat", dict(messages=[{"role": "user", "content": _random_text(rng)}],
                                          max_tokens=max_tokens, temperature=0, logprobs=True, top_logprobs=TOP)))
        elif i % 3 == 1:
            requests.append(("completion", dict(prompt=_random_text(rng), max_tokens=max_tokens, logprobs=TOP,
                                                **GREEDY)))
        else:
            ids = [rng.randrange(1000, 190000) for _ in range(rng.randint(1, 40))]
            requests.append(("completion", dict(prompt=ids, max_tokens=max_tokens, logprobs=TOP, **GREEDY)))

    def answer(kind, response):
        choice = response.choices[0]
        if kind == "chat":
            return choice.message.content, chat_tokens(choice.logprobs)
        return choice.text, completion_tokens(choice.logprobs)

    alone = []
    for kind, kw in requests:
        create = client.chat.completions.create if kind == "chat" else client.completions.create
        alone.append(answer(kind, create(model=MODEL, **kw)))

    async def together():
        calls = [(aclient.chat.completions.create if kind == "chat" else aclient.completions.create)(model=MODEL, **kw)
                 for kind, kw in requests]
        return await asyncio.gather(*calls)

    concurrent = [answer(kind, r) for (kind, _), r in zip(requests, asyncio.run(together()))]
    for (text, tokens), (text_alone, tokens_alone), (kind, kw) in zip(concurrent, alone, requests):
        # completions ignore EOS: every token is there; a chat reply may end at a stop token first
        assert len(tokens) == len(tokens_alone) == kw["max_tokens"] or kind == "chat"
        assert_same_greedy(tokens, tokens_alone)
        if [t for t, _, _ in tokens] == [t for t, _, _ in tokens_alone]:
            assert text == text_alone
    assert len({text for text, _ in alone}) > 8


def test_metrics_count_the_served_tokens(client, http, server):
    def read():
        text = http.get("/metrics").text
        return {name: metric_values(text, "quickmoe:" + name) for name in
                ("time_to_first_token_seconds_count", "inter_token_latency_seconds_count",
                 "e2e_request_latency_seconds_count", "generation_tokens_total", "startup_phase_seconds",
                 "request_queue_time_seconds_count", "prefix_cache_queries_total", "prompt_tokens_total")}

    before = read()
    client.completions.create(model=MODEL, prompt="metrics", max_tokens=5, **GREEDY)
    after = read()
    key = '{model_name="tiny"}'
    assert after["time_to_first_token_seconds_count"][key] == before["time_to_first_token_seconds_count"][key] + 1
    assert after["inter_token_latency_seconds_count"][key] == before["inter_token_latency_seconds_count"][key] + 4
    assert after["e2e_request_latency_seconds_count"][key] == before["e2e_request_latency_seconds_count"][key] + 1
    assert after["generation_tokens_total"][key] == before["generation_tokens_total"][key] + 5
    assert after["request_queue_time_seconds_count"][key] == before["request_queue_time_seconds_count"][key] + 1
    n_prompt = len(server.serving.tokenizer.encode("metrics"))
    assert after["prompt_tokens_total"][key] == before["prompt_tokens_total"][key] + n_prompt
    assert after["prefix_cache_queries_total"][key] == before["prefix_cache_queries_total"][key] + n_prompt
    assert {'{model_name="tiny",phase="load"}', '{model_name="tiny",phase="build"}'} <= set(
        after["startup_phase_seconds"])


def test_streamed_text_with_unicode_line_separators_keeps_its_events_whole(http, server, monkeypatch):
    """Text holding U+2028, U+2029 and U+0085 (random tokens can decode to them): every SSE data line still parses
    when read with a splitlines-style decoder (httpx's iter_lines, as `bench serve` used to), and the text is the
    same. Raw in the JSON, those characters cut the events: `bench serve` counted such requests as failed."""
    tok = server.serving.tokenizer
    text = "one\u2028two\u2029three\x85four"
    script = tok.encode(text)
    runner = server.llm.runner
    seed = random.Random().randrange(1, 10**9)
    monkeypatch.setattr(runner, "sampler", ScriptedSampler(runner.sampler, {seed: script}))
    body = {"model": MODEL, "prompt": "x", "max_tokens": len(script), "seed": seed, "stream": True,
            "ignore_eos": True}
    with http.stream("POST", "/v1/completions", json=body) as response:
        data = [line[5:].strip() for line in response.iter_lines() if line.startswith("data:")]
    assert data[-1] == "[DONE]"
    events = [json.loads(d) for d in data[:-1]]  # raises on a cut event
    assert "".join(e["choices"][0]["text"] for e in events if e["choices"]) == text
