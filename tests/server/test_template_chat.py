"""/v1/chat/completions and `LLM.chat` for a model whose chat is a template (Qwen3-MoE tiny, random weights):
the prompt is the template's rendering (as transformers renders it), the reply is plain `content`."""

from __future__ import annotations

import json

import httpx
import pytest

from quickmoe.llm import LLM
from quickmoe.server.config import ServerConfig

from .conftest import ServerThread


@pytest.fixture(scope="module")
def qwen_llm(tmp_path_factory) -> LLM:
    from quickmoe.checkpoint.synth import write_checkpoint

    model_dir = write_checkpoint(tmp_path_factory.mktemp("qwen") / "model", preset="qwen3-moe-tiny", layers=2,
                                 experts=4, overrides=dict(hidden_size=64, head_dim=16, moe_intermediate_size=32,
                                                           intermediate_size=64), progress=False)
    return LLM(model_dir, device="cpu", max_model_len=128, kv_cache_memory=16 << 20)


def test_llm_chat_renders_the_template(qwen_llm):
    messages = [{"role": "user", "content": "Hello"}]
    prompt = qwen_llm.tokenizer.render_chat(messages)
    assert prompt[0] == 151644 and prompt.count(151645) == 1  # <|im_start|>, one <|im_end|>
    assert qwen_llm.tokenizer.decode(prompt) == "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
    out = qwen_llm.chat(messages)
    assert out.prompt_token_ids == prompt and len(out.token_ids) > 0


def test_chat_completion_over_http(qwen_llm):
    want = qwen_llm.chat([{"role": "user", "content": "Hi"}], _greedy(8))  # before the server owns the engine
    prompt = qwen_llm.tokenizer.render_chat([{"role": "user", "content": "Hi"}])
    server = ServerThread(qwen_llm, ServerConfig(port=0, served_model_name="qwen"))
    try:
        with httpx.Client(base_url=server.url, timeout=60, trust_env=False) as client:
            body = {"model": "qwen", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8,
                    "temperature": 0}
            reply = client.post("/v1/chat/completions", json=body)
            assert reply.status_code == 200, reply.text
            data = reply.json()
            message = data["choices"][0]["message"]
            assert message["content"] == want.text and data["usage"]["prompt_tokens"] == len(prompt)
            streamed = client.post("/v1/chat/completions", json={**body, "max_tokens": 12, "stream": True})
            assert streamed.status_code == 200 and "[DONE]" in streamed.text
            deltas = [json.loads(line[6:])["choices"][0]["delta"].get("content") for line in streamed.text.splitlines()
                      if line.startswith("data: {")]
            # plain text streams as it is decoded (harmony's parser would hold it, waiting for a header)
            assert len([d for d in deltas if d]) >= 3
    finally:
        server.stop()


def _greedy(n: int):
    from quickmoe.engine.sampling_params import SamplingParams

    return SamplingParams(max_tokens=n, temperature=0)


def test_ids_the_model_has_past_its_tokenizer_decode_to_no_text(qwen_llm):
    """Qwen3's model has 151,936 output rows for 151,669 tokenizer ids. A generated id among the extra rows (here
    forced by logit_bias) is a token with no text, as in transformers' decode, not an error that ends the request;
    ids past the model's rows stay an error."""
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.errors import TokenizerError

    tokenizer = qwen_llm.tokenizer
    extra = tokenizer.vocab_size + 5
    assert tokenizer.vocab_size < extra < qwen_llm.config.vocab_size
    params = SamplingParams(max_tokens=3, temperature=0, logit_bias={extra: 100.0})
    out = qwen_llm.generate([[9707, 11, 1879]], params)[0]  # "Hello, world"
    assert out.token_ids == [extra] * 3 and out.text == ""
    assert tokenizer.id_limit == qwen_llm.config.vocab_size
    hello = tokenizer.encode("Hello")
    assert tokenizer.decode([*hello, extra, *hello]) == "HelloHello"
    with pytest.raises(TokenizerError, match=f"token id {qwen_llm.config.vocab_size} is outside the vocabulary"):
        tokenizer.decode([qwen_llm.config.vocab_size])
    server = ServerThread(qwen_llm, ServerConfig(port=0, served_model_name="qwen"))
    try:
        with httpx.Client(base_url=server.url, timeout=60, trust_env=False) as client:
            body = {"model": "qwen", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
                    "temperature": 0, "logit_bias": {str(extra): 100}, "logprobs": True, "top_logprobs": 2}
            reply = client.post("/v1/chat/completions", json=body)
            assert reply.status_code == 200, reply.text
            choice = reply.json()["choices"][0]
            assert choice["message"]["content"] == ""
            assert [(e["token"], e["bytes"]) for e in choice["logprobs"]["content"]] == [("", [])] * 2
            streamed = client.post("/v1/chat/completions", json={**body, "stream": True})
            assert streamed.status_code == 200 and "[DONE]" in streamed.text
    finally:
        server.stop()


def test_bench_generate_prompts_hold_only_ordinary_ids(qwen_llm):
    """`bench generate`'s random prompts stay below Qwen3's first special token (<|endoftext|> = 151,643) and its
    tokenizer's ids: the 256-prompt run drew ids past the tokenizer before (2026-11-29 seventh session)."""
    from quickmoe.bench.generate import random_prompts, text_ids

    tokenizer = qwen_llm.tokenizer
    low, top = text_ids(qwen_llm.config.vocab_size, tokenizer)
    assert (low, top) == (0, min(tokenizer.special_token_ids)) and top == 151643
    prompts = random_prompts(64, 200, (low, top), seed=0)
    assert max(max(p) for p in prompts) >= top - 200  # the draw covers the range up to the limit
    assert not any(t in tokenizer.special_token_ids or t >= top for p in prompts for t in p)


def test_bench_generate_prompts_skip_special_tokens_at_the_start_of_the_vocabulary(tmp_path):
    """Mixtral's tokenizer has <unk>, <s> and </s> at ids 0-2: the prompts' ids lie past them and below the
    vocabulary (the first special token used to bound the draw, which left Mixtral no id: 2026-11-29 eighth
    session)."""
    from quickmoe.bench.generate import random_prompts, text_ids
    from quickmoe.checkpoint.synth import write_checkpoint
    from quickmoe.config import ModelConfig
    from quickmoe.tokenizer import load_tokenizer

    model_dir = write_checkpoint(tmp_path / "mixtral", preset="mixtral-tiny", layers=1, experts=2,
                                 overrides=dict(hidden_size=32, intermediate_size=32), progress=False)
    tokenizer = load_tokenizer(model_dir)
    vocab_size = ModelConfig.from_dir(model_dir).vocab_size
    specials = set(tokenizer.special_token_ids)
    assert {0, 1, 2} <= specials
    low, high = text_ids(vocab_size, tokenizer)
    assert low == 3 and high == min(vocab_size, tokenizer.vocab_size, min((t for t in specials if t > 2),
                                                                          default=vocab_size))
    prompts = random_prompts(32, 100, (low, high), seed=1)
    assert not any(t in specials or t >= high for p in prompts for t in p)
    assert min(min(p) for p in prompts) < low + 100  # the draw covers the range from its start
