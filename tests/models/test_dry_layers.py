"""The precompile's dry steps over the shortest layer prefix holding every layer kind (executor/dry_layers.py):
the prefix's length for gpt-oss (sliding and full layers alternate), Qwen3 (a dense layer among MoE layers), an
independent check that every later layer has a twin in it (the layer before it too), and the decoder running the
prefix alone, then all layers again."""

from __future__ import annotations

import pytest
import torch

from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.executor.dry_layers import dry_layers, layer_prefix
from quickmoe.llm import LLM

GPT_OSS = dict(layers=4, experts=4, hidden_size=64, intermediate_size=64, num_experts_per_tok=2, sliding_window=16,
               seed=41)
QWEN3 = dict(preset="qwen3-moe-tiny", experts_dtype=None, layers=5, experts=4, seed=47)


def _twin(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    """Same class, and the same tensors by name, shape and dtype (written apart from `layer_kind`)."""
    def tensors(m):
        return sorted((n, tuple(t.shape), str(t.dtype)) for n, t in [*m.named_parameters(), *m.named_buffers()])
    return type(a) is type(b) and tensors(a) == tensors(b)


@pytest.mark.parametrize("kw, mlp_only, want", [(GPT_OSS, None, 3), (QWEN3, [1], 4), (QWEN3, [3], 5),
                                                (QWEN3, [], 2)])
def test_the_prefix_holds_a_twin_of_every_layer(ckpt_factory, kw, mlp_only, want):
    extra = {} if mlp_only is None else {"mlp_only_layers": mlp_only}
    llm = LLM(ckpt_factory(**kw, **extra), device="cpu", max_model_len=64)
    layers, groups = llm.runner.model.model.layers, llm.runner.kv_cache.layer_group
    length = layer_prefix(layers, groups)
    assert length == want
    def twins(i, j):  # layers i and j, and the layers before them, of one kind
        return (_twin(layers[i], layers[j]) and groups[i] == groups[j]
                and (i == j == 0 or i > 0 and j > 0 and _twin(layers[i - 1], layers[j - 1])
                     and groups[i - 1] == groups[j - 1]))
    for idx in range(length, len(layers)):
        assert any(twins(idx, j) for j in range(length)), idx
    assert not any(twins(length - 1, j) for j in range(length - 1))  # none shorter would do
    if mlp_only is None:  # gpt-oss: two kinds only by their KV cache group (sliding, full)
        assert groups[0] != groups[1] and _twin(layers[0], layers[1])


def test_the_decoder_runs_the_prefix_alone_and_then_every_layer_again(ckpt_factory):
    llm = LLM(ckpt_factory(**GPT_OSS), device="cpu", max_model_len=64)
    model = llm.runner.model
    calls: list[int] = []
    for idx, layer in enumerate(model.model.layers):
        layer.register_forward_hook(lambda *_, idx=idx: calls.append(idx))
    prompt = [[5, 9, 2, 7]]
    params = SamplingParams(max_tokens=3, temperature=0, ignore_eos=True)
    want = llm.generate(prompt, params)[0].token_ids
    calls.clear()
    with dry_layers(model, llm.runner.kv_cache.layer_group) as length:
        assert length == 3 and len(model.model.layers) == 3
        llm.runner.execute(prompt, [0], llm.runner.scratch_block_tables([4]))
        assert calls and set(calls) == {0, 1, 2}
    calls.clear()
    assert len(model.model.layers) == 4
    assert llm.generate(prompt, params)[0].token_ids == want
    assert set(calls) == {0, 1, 2, 3}
