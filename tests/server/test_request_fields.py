"""Every field is honoured or refused. Each field of OpenAI's completions and chat schemas (read from the installed
`openai` package, so a field OpenAI adds is covered) that quickmoe does not implement gets a 400 naming it when it
holds a value that would matter; the implemented ones change the answer as defined (n, echo with prompt
log-probabilities, lists of prompts, the default max_tokens, logit_bias, penalties)."""

from __future__ import annotations

import random

import pytest
import torch
from openai.types import completion_create_params
from openai.types.chat import completion_create_params as chat_create_params

from quickmoe.server.request_fields import UNSUPPORTED

from ..models.conftest import load_hf_reference
from .conftest import MODEL
from .greedy import TOP, assert_same_greedy, completion_tokens

OK = {"completions": {"model": MODEL, "prompt": "Hello", "max_tokens": 2, "temperature": 0},
      "chat/completions": {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
                           "temperature": 0}}
# what quickmoe implements of OpenAI's schemas (the rest must be refused)
IMPLEMENTED = {
    "completions": {"model", "prompt", "max_tokens", "temperature", "top_p", "n", "stop", "seed", "stream",
                    "stream_options", "presence_penalty", "frequency_penalty", "logit_bias", "user", "echo",
                    "logprobs", "best_of"},
    "chat/completions": {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n",
                         "stop", "seed", "stream", "stream_options", "presence_penalty", "frequency_penalty",
                         "logit_bias", "user", "logprobs", "top_logprobs", "reasoning_effort", "tools", "tool_choice",
                         "parallel_tool_calls", "response_format", "prompt_cache_key", "safety_identifier"},
}
SCHEMAS = {"completions": completion_create_params.CompletionCreateParamsBase,
           "chat/completions": chat_create_params.CompletionCreateParamsBase}
# a value that would change the answer, for each field refused
MEANINGFUL = {"store": True, "modalities": ["text", "audio"], "service_tier": "priority", "metadata": {"k": "v"},
              "suffix": "tail", "verbosity": "high"}


def _refused(endpoint: str) -> list[str]:
    return sorted(set(SCHEMAS[endpoint].__annotations__) - IMPLEMENTED[endpoint])


@pytest.mark.parametrize("endpoint", ["completions", "chat/completions"])
def test_every_openai_field_not_implemented_is_a_400_naming_it(http, endpoint):
    refused = _refused(endpoint)
    assert refused and set(refused) <= set(UNSUPPORTED[endpoint]), "the server's table knows every refused field"
    for name in refused:
        value = MEANINGFUL.get(name, {"type": "x", "value": 1})
        response = http.post(f"/v1/{endpoint}", json={**OK[endpoint], name: value})
        assert response.status_code == 400, (name, response.text)
        error = response.json()["error"]
        assert error["param"] == name and name in error["message"], error
    # their neutral values are fine (what SDKs send by default)
    response = http.post("/v1/chat/completions", json={**OK["chat/completions"], "store": False, "metadata": None})
    assert response.status_code == 200, response.text
    # vLLM-era and unknown fields are refused by name too, never dropped
    for name in ("guided_json", "chat_template_kwargs", "structured_output", "spaces_between_special_tokens"):
        response = http.post(f"/v1/{endpoint}", json={**OK[endpoint], name: {"a": 1}})
        assert response.status_code == 400 and response.json()["error"]["param"] == name


def test_n_prompts_lists_and_default_max_tokens(client, server):
    rng = random.Random()
    prompts = [" ".join(rng.choice(["a", "b", "router", "expert"]) for _ in range(rng.randint(1, 6))) for _ in range(3)]
    out = client.completions.create(model=MODEL, prompt=prompts, n=2, temperature=1.0, seed=rng.randrange(10**6),
                                    extra_body={"ignore_eos": True})
    assert [c.index for c in out.choices] == list(range(6))
    assert all(c.finish_reason == "length" for c in out.choices)
    assert out.usage.completion_tokens == 6 * 16  # the default max_tokens: 16
    tok = server.serving.tokenizer
    assert out.usage.prompt_tokens == sum(len(tok.encode(p)) for p in prompts)
    # each prompt's greedy choice is what it gets alone
    greedy_args = dict(model=MODEL, max_tokens=4, temperature=0, logprobs=TOP, extra_body={"ignore_eos": True})
    greedy = client.completions.create(prompt=prompts, **greedy_args)
    for i, p in enumerate(prompts):
        alone = client.completions.create(prompt=p, **greedy_args)
        assert_same_greedy(completion_tokens(greedy.choices[i].logprobs), completion_tokens(alone.choices[0].logprobs))
    chat = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompts[0]}], n=4,
                                          max_tokens=5, temperature=1.0, seed=rng.randrange(10**6))
    assert [c.index for c in chat.choices] == [0, 1, 2, 3]
    # streamed: two prompts, two greedy samples each (indices 0-1 and 2-3), each the prompt's greedy continuation
    streamed = list(client.completions.create(prompt=prompts[:2], n=2, stream=True,
                                              **{**greedy_args, "max_tokens": 3}))
    tokens: dict[int, list] = {}
    texts: dict[int, str] = {}
    for chunk in streamed:
        for c in chunk.choices:
            tokens.setdefault(c.index, []).extend(completion_tokens(c.logprobs) if c.logprobs else [])
            texts[c.index] = texts.get(c.index, "") + c.text
    assert sorted(tokens) == [0, 1, 2, 3] and all(len(t) == 3 for t in tokens.values())
    for index, prompt in ((0, 0), (1, 0), (2, 1), (3, 1)):
        want = completion_tokens(greedy.choices[prompt].logprobs)
        assert_same_greedy(tokens[index], want)
        if [t for t, _, _ in tokens[index]] == [t for t, _, _ in want[:3]]:
            assert texts[index] == greedy.choices[prompt].text[:len(texts[index])]


def test_logit_bias_and_penalties_change_the_answer_as_defined(client, server):
    """A +20 bias makes a token win every greedy step; a frequency penalty of 2 takes 2 off per occurrence, so it
    stops winning every step after about 10 (the exact values are tested against a float64 reference in
    tests/models/test_sampling_features.py)."""
    tok = server.serving.tokenizer
    target = tok.encode(random.choice([" quickmoe", " router", " expert", " token"]))[0]
    text = tok.decode([target])
    common = dict(model=MODEL, prompt="Hi", max_tokens=30, temperature=0, logit_bias={str(target): 20}, logprobs=0)
    biased = client.completions.create(**common, extra_body={"ignore_eos": True})
    assert biased.choices[0].logprobs.tokens == [text] * 30
    penalized = client.completions.create(**common, frequency_penalty=2.0, extra_body={"ignore_eos": True})
    tokens = penalized.choices[0].logprobs.tokens
    first_other = next(i for i, t in enumerate(tokens) if t != text)  # StopIteration: the penalty did nothing
    assert 3 <= first_other < 25


def test_echo_with_logprobs_returns_the_prompt_and_its_logprobs(client, server):
    """lm-eval-harness's loglikelihood request: echo + logprobs with max_tokens 0 or 1 gives every prompt token's
    log-probability, equal to transformers' on the same checkpoint within 1e-4 (CPU, float32)."""
    prompt = "The mixture of experts routes each token " + random.choice(["east", "west", "home", "twice"])
    ids = server.serving.tokenizer.encode(prompt)
    n_prompt = len(ids)
    hf = load_hf_reference(server.llm.model_dir)
    with torch.no_grad():
        want = torch.log_softmax(hf(torch.tensor([ids])).logits[0].double(), dim=-1)  # [L, V]
    for max_tokens in (0, 1):
        out = client.completions.create(model=MODEL, prompt=prompt, max_tokens=max_tokens, echo=True, logprobs=1,
                                        temperature=0)
        choice = out.choices[0]
        assert choice.text.startswith(prompt) and (max_tokens or choice.text == prompt)
        lp = choice.logprobs
        assert len(lp.tokens) == n_prompt + max_tokens and lp.token_logprobs[0] is None
        assert all(abs(lp.token_logprobs[i] - want[i - 1, ids[i]].item()) < 1e-4 for i in range(1, n_prompt))
        assert "".join(lp.tokens[:n_prompt]) == prompt and lp.text_offset[:2] == [0, len(lp.tokens[0])]
        assert out.usage.completion_tokens == max_tokens
    plain = client.completions.create(model=MODEL, prompt=prompt, max_tokens=2, temperature=0,
                                      extra_body={"prompt_logprobs": 0})
    entries = plain.model_extra.get("choices", None) or plain.choices[0].model_extra["prompt_logprobs"]
    assert entries[0] is None and len(entries) == n_prompt
    assert [round(next(iter(e.values()))["logprob"], 4) for e in entries[1:]] == \
        [round(v, 4) for v in lp.token_logprobs[1:n_prompt]]
