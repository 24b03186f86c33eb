"""gpt-oss tool calling and the Responses API through the official `openai` client over real HTTP. The tiny model
has random weights, so its tokens are scripted with harmony's own rendering of the messages it should write (the
sampler's tokens are replaced on the device, as the runner would take them): a tool-call round trip (the call
parsed into tool_calls, the tool's result sent back as a `tool` message and rendered as harmony's tool message,
the final answer) whole and streamed, tool_choice named / required / none, and /v1/responses whole, streamed,
with function calls and previous_response_id."""

from __future__ import annotations

import dataclasses
import json
import random

import openai
import openai_harmony as oh
import pytest

from quickmoe.tokenizer.chat import harmony_encoding
from quickmoe.tokenizer.vocab import END, ENDOFTEXT, RETURN

from .conftest import MODEL
from .test_openai_client import ScriptedSampler

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}},
         {"type": "function", "function": {"name": "get_time", "description": "The time now.",
                                           "parameters": {"type": "object", "properties": {}}}}]


def _assistant(channel: str, text: str, recipient: str | None = None) -> list[int]:
    """Harmony's tokens of one assistant message after <|start|>assistant (a final one ends with <|return|>)."""
    message = oh.Message.from_role_and_content(oh.Role.ASSISTANT, text).with_channel(channel)
    if recipient is not None:
        message = message.with_recipient(recipient).with_content_type("<|constrain|>json")
    ids = list(harmony_encoding().render(message))[2:]
    return ids[:-1] + [RETURN] if ids[-1] == END and channel == "final" else ids


def _then(ids: list[int]) -> list[int]:
    """A later message of the same reply: <|start|>assistant first."""
    return list(harmony_encoding().render(oh.Message.from_role_and_content(oh.Role.ASSISTANT, "x")))[:2] + ids


class ScriptAll:
    """Each new request (told apart by its SamplingParams object) takes the next script; its rows take the script's
    tokens in order (the last one repeated: a step in flight when it finished may sample one more)."""

    def __init__(self, real, scripts: list[list[int]]) -> None:
        self.real, self.scripts, self.assigned = real, list(scripts), {}

    def sample(self, logits, params, generators, *processing):
        out = self.real.sample(logits, params, generators, *processing)
        ids = out.token_ids.clone()
        for row, p in enumerate(params):
            if id(p) not in self.assigned:
                self.assigned[id(p)] = [self.scripts.pop(0), 0, p]  # (p kept: its id stays unique)
            entry = self.assigned[id(p)]
            ids[row] = entry[0][min(entry[1], len(entry[0]) - 1)]
            entry[1] += 1
        return dataclasses.replace(out, token_ids=ids)


@pytest.fixture()
def script(server, monkeypatch):
    runner = server.llm.runner

    def use(sampler):
        monkeypatch.setattr(runner, "sampler", sampler)

    return lambda scripts: use(ScriptedSampler(runner.sampler, scripts))


def _seeds(n: int) -> list[int]:
    return random.Random().sample(range(1, 10**9), n)


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_call_round_trip(client, http, script, stream):
    city = random.choice(["Paris", "Tokyo", "Lagos", "Lima"])
    thought, answer = f"I should look up {city}.", f"It is 21 degrees in {city}."
    first = _assistant("analysis", thought) + _then(_assistant("commentary", json.dumps({"city": city}),
                                                                "functions.get_weather"))
    seeds = _seeds(2)
    script({seeds[0]: first, seeds[1]: _assistant("final", answer)})
    messages = [{"role": "user", "content": f"What is the weather in {city}?"}]

    def ask(seed: int, msgs: list[dict]):
        if not stream:
            reply = client.chat.completions.create(model=MODEL, messages=msgs, tools=TOOLS, seed=seed, max_tokens=60)
            choice = reply.choices[0]
            calls = [{"id": c.id, "type": "function", "function": {"name": c.function.name,
                                                                   "arguments": c.function.arguments}}
                     for c in choice.message.tool_calls or ()]
            return choice.message.content, choice.message.model_extra["reasoning"], calls, choice.finish_reason
        content, reasoning, calls, finish = "", "", [], None
        for chunk in client.chat.completions.create(model=MODEL, messages=msgs, tools=TOOLS, seed=seed,
                                                    max_tokens=60, stream=True):
            delta = chunk.choices[0].delta
            content += delta.content or ""
            reasoning += (delta.model_extra or {}).get("reasoning") or ""
            for c in delta.tool_calls or ():
                if c.id:
                    calls.append({"id": c.id, "type": "function", "function": {"name": c.function.name,
                                                                                "arguments": ""}})
                calls[c.index]["function"]["arguments"] += c.function.arguments or ""
            finish = chunk.choices[0].finish_reason or finish
        return content or None, reasoning or None, calls, finish

    content, reasoning, calls, finish = ask(seeds[0], messages)
    assert finish == "tool_calls" and content is None and reasoning == thought
    assert [c["function"]["name"] for c in calls] == ["get_weather"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": city}
    result = json.dumps({"temperature": 21})
    follow = messages + [{"role": "assistant", "content": None, "tool_calls": calls},
                         {"role": "tool", "tool_call_id": calls[0]["id"], "content": result}]
    rendered = http.post("/tokenize", json={"messages": follow, "tools": TOOLS}).json()["tokens"]
    text = harmony_encoding().decode(rendered)
    assert f"<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{result}<|end|>" in text
    assert "type get_weather = (_: {" in text and "<|constrain|>json<|message|>" in text
    content, reasoning, calls, finish = ask(seeds[1], follow)
    assert (content, calls, finish) == (answer, [], "stop")


def test_tool_choice_named_required_and_none(client, http, script):
    seeds = _seeds(3)
    after_prefix = _assistant("commentary", "{}", "functions.get_time")[3:]  # the model names the function
    script({seeds[0]: [*harmony_encoding().encode('{"city": "Oslo"}', allowed_special="all"),
                       _assistant("commentary", "{}", "functions.x")[-1]],
            seeds[1]: after_prefix})
    messages = [{"role": "user", "content": "Help me."}]
    named = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, seed=seeds[0], max_tokens=50,
                                           tool_choice={"type": "function", "function": {"name": "get_weather"}})
    call = named.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Oslo"})
    required = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, seed=seeds[1],
                                              max_tokens=50, tool_choice="required")
    assert [c.function.name for c in required.choices[0].message.tool_calls] == ["get_time"]
    assert required.choices[0].finish_reason == "tool_calls"
    plain = http.post("/tokenize", json={"messages": messages}).json()["count"]
    none = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, tool_choice="none",
                                          max_tokens=1, temperature=0)
    assert none.usage.prompt_tokens == plain  # the tools are not described to the model
    auto = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, max_tokens=1, temperature=0)
    assert auto.usage.prompt_tokens > plain


def test_responses_whole_with_reasoning_function_calls_and_previous_response_id(client, server, monkeypatch):
    runner, tok = server.llm.runner, server.serving.tokenizer
    thought, answer = "Two plus two.", "4"
    call = _assistant("commentary", json.dumps({"city": "Rome"}), "functions.get_weather")
    monkeypatch.setattr(runner, "sampler", ScriptAll(runner.sampler, [
        _assistant("analysis", thought) + _then(_assistant("final", answer)), call,
        _assistant("final", "Sunny in Rome.")]))
    first = client.responses.create(model=MODEL, input="What is 2 + 2?", instructions="Be brief.",
                                    reasoning={"effort": "low"}, max_output_tokens=100)
    assert [item.type for item in first.output] == ["reasoning", "message"]
    assert first.output[0].content[0].text == thought and first.output_text == answer
    assert first.status == "completed" and first.usage.output_tokens > 2
    tools = [{"type": "function", **TOOLS[0]["function"]}]
    second = client.responses.create(model=MODEL, input="Weather in Rome?", previous_response_id=first.id,
                                     tools=tools)
    history = [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "", "reasoning": thought},
               {"role": "assistant", "content": answer}, {"role": "user", "content": "Weather in Rome?"}]
    rendered = tok.render_chat(history, None, [TOOLS[0]["function"]])
    assert second.usage.input_tokens == len(rendered)  # the stored conversation, without the old instructions
    fc = second.output[0]
    assert fc.type == "function_call" and fc.name == "get_weather" and json.loads(fc.arguments) == {"city": "Rome"}
    third = client.responses.create(model=MODEL, previous_response_id=second.id, tools=tools, input=[
        {"type": "function_call_output", "call_id": fc.call_id, "output": "sunny"}])
    assert third.output_text == "Sunny in Rome."
    with pytest.raises(openai.BadRequestError) as error:
        client.responses.create(model=MODEL, input="x", previous_response_id="resp_missing")
    assert error.value.body["param"] == "previous_response_id"
    with pytest.raises(openai.BadRequestError) as error:
        client.responses.create(model=MODEL, input="x", background=True)
    assert error.value.body["param"] == "background"


def test_responses_streamed_events(client, server, monkeypatch):
    runner = server.llm.runner
    thought, answer = "Think: hello back.", "Hello there, friend."
    monkeypatch.setattr(runner, "sampler", ScriptAll(runner.sampler, [
        _assistant("analysis", thought) + _then(_assistant("final", answer))]))
    events = list(client.responses.create(model=MODEL, input="Hello!", stream=True))
    kinds = [e.type for e in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds[-1] == "response.completed" and [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.reasoning_text.delta") == thought
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == answer and len(deltas) > 2
    assert [e.text for e in events if e.type == "response.output_text.done"] == [answer]
    assert [e.item.type for e in events if e.type == "response.output_item.done"] == ["reasoning", "message"]
    final = events[-1].response
    assert final.output_text == answer and final.status == "completed"


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_ended_by_endoftext_keeps_it_out_of_the_text(client, server, monkeypatch, stream):
    """<|endoftext|> stops every request (gpt-oss's generation_config) but harmony reads it as message text: the
    token that ended the generation is not part of the reply, in chat and in the Responses API."""
    runner = server.llm.runner
    answer = random.choice(["4", '{"answer":7}', "Paris é 日本"])
    final = _assistant("final", answer)[:-1] + [ENDOFTEXT]  # <|return|> replaced by <|endoftext|>
    monkeypatch.setattr(runner, "sampler", ScriptAll(runner.sampler, [final, final]))
    messages = [{"role": "user", "content": "2+2?"}]
    if stream:
        chunks = list(client.chat.completions.create(model=MODEL, messages=messages, max_tokens=50, stream=True))
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        events = list(client.responses.create(model=MODEL, input="2+2?", max_output_tokens=50, stream=True))
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    else:
        reply = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=50)
        content, finish = reply.choices[0].message.content, [reply.choices[0].finish_reason]
        text = client.responses.create(model=MODEL, input="2+2?", max_output_tokens=50).output_text
    assert (content, finish, text) == (answer, ["stop"], answer)
