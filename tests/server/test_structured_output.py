"""Structured output through the official client: with the tiny random model the token mask alone decides the
structure, so every output must parse and validate: 50 random JSON schemas (bounded so that every path ends), a
JSON object, a regex, a choice, a Lark grammar; in a harmony chat the answer after the final-channel header is
constrained and the reasoning before it is not; an invalid schema is a 400 naming the field."""

from __future__ import annotations

import asyncio
import json
import random
import re

import jsonschema
import openai
import pytest

from quickmoe.tokenizer.vocab import CHANNEL, END, MESSAGE, START

from .conftest import MODEL
from .test_openai_client import ScriptedSampler


def _schema(rng: random.Random, depth: int = 0) -> dict:
    kinds = ["string", "integer", "boolean", "enum", "array"] + (["object"] * 2 if depth == 0 else [])
    kind = rng.choice(kinds)
    if kind == "string":
        return {"type": "string", "maxLength": rng.randint(0, 5)}
    if kind == "integer":
        lo = rng.randint(-50, 50)
        return {"type": "integer", "minimum": lo, "maximum": lo + rng.randint(0, 500)}
    if kind == "boolean":
        return {"type": "boolean"}
    if kind == "enum":
        return {"enum": rng.sample(["a", "bb", 3, True, None, "x y"], rng.randint(1, 4))}
    if kind == "array":
        return {"type": "array", "items": _schema(rng, depth + 1) if depth == 0 else {"type": "boolean"},
                "minItems": 0, "maxItems": rng.randint(1, 3)}
    names = rng.sample(["id", "name", "ok", "tags", "n", "kind"], rng.randint(1, 3))
    return {"type": "object", "properties": {n: _schema(rng, depth + 1) for n in names}, "required": names,
            "additionalProperties": False}


def test_50_random_json_schemas_parse_and_validate(aclient):
    rng = random.Random()
    schemas = [{"type": "object", "properties": {"v": _schema(rng)}, "required": ["v"], "additionalProperties": False}
               for _ in range(50)]

    async def one(schema: dict):
        return await aclient.completions.create(
            model=MODEL, prompt="JSON:", max_tokens=200, temperature=rng.choice([0, 0.8, 1.2]),
            seed=rng.randrange(10**6), extra_body={"response_format": {"type": "json_schema", "json_schema": {
                "name": "s", "schema": schema}}})

    async def all_of():
        return await asyncio.gather(*(one(s) for s in schemas))

    for schema, out in zip(schemas, asyncio.run(all_of())):
        choice = out.choices[0]
        assert choice.finish_reason == "stop", (schema, choice.text)
        jsonschema.validate(json.loads(choice.text), schema)


def test_json_object_regex_choice_and_grammar(client):
    common = dict(model=MODEL, prompt="Answer:", max_tokens=60, temperature=1.0)
    obj = client.completions.create(**common, seed=1, extra_body={"response_format": {"type": "json_object"}})
    text = obj.choices[0].text  # unbounded strings: a random model may still be inside one at max_tokens
    assert text.startswith("{") and (obj.choices[0].finish_reason == "length" or isinstance(json.loads(text), dict))
    pattern = r"[a-c]{3}-[0-9]{2}"
    for seed in range(3):
        text = client.completions.create(**common, seed=seed, extra_body={"structured_outputs": {"regex": pattern}})
        assert re.fullmatch(pattern, text.choices[0].text)
        picked = client.completions.create(**common, seed=seed,
                                           extra_body={"structured_outputs": {"choice": ["red", "green", "blue"]}})
        assert picked.choices[0].text in ("red", "green", "blue")
    grammar = 'start: "yes" | "no" | "maybe " NUMBER\nNUMBER: /[1-9]/'
    said = client.completions.create(**common, seed=4, extra_body={"structured_outputs": {"grammar": grammar}})
    assert re.fullmatch(r"yes|no|maybe [1-9]", said.choices[0].text)
    for body, param in (({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": 5}}}},
                         "response_format"), ({"structured_outputs": {"regex": "(unclosed"}}, "structured_outputs"),
                        ({"structured_outputs": {"regex": "a", "choice": ["b"]}}, "structured_outputs")):
        with pytest.raises(openai.BadRequestError) as error:
            client.completions.create(**common, extra_body=body)
        assert error.value.body["param"] == param


def test_a_harmony_chat_constrains_the_answer_not_the_reasoning(client, server, monkeypatch):
    tok = server.serving.tokenizer
    seed = random.randrange(1, 10**9)
    reasoning = "Some free reasoning {not json"
    script = ([CHANNEL] + tok.encode("analysis") + [MESSAGE] + tok.encode(reasoning) + [END, START]
              + tok.encode("assistant") + [CHANNEL] + tok.encode("final") + [MESSAGE])
    runner = server.llm.runner
    monkeypatch.setattr(runner, "sampler", ScriptedSampler(runner.sampler, {seed: script}, then_real=True))
    schema = {"type": "object", "properties": {"answer": {"type": "integer", "minimum": 0, "maximum": 9}},
              "required": ["answer"], "additionalProperties": False}
    reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "2+2?"}], seed=seed,
                                           max_tokens=100, response_format={"type": "json_schema", "json_schema": {
                                               "name": "a", "schema": schema}})
    message = reply.choices[0].message
    assert message.model_extra["reasoning"] == reasoning
    jsonschema.validate(json.loads(message.content), schema)
    assert reply.choices[0].finish_reason == "stop"
