"""Qwen3-MoE and Mixtral against transformers' Qwen3MoeForCausalLM / MixtralForCausalLM on the same random
checkpoints (CPU, float32); FP8 and NVFP4 checkpoints against transformers on their dequantized twins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from quickmoe.config import EngineConfig
from quickmoe.errors import CheckpointError
from quickmoe.executor.model_runner import ModelRunner

from .conftest import PagedSteps, assert_greedy_matches, assert_logits_match
from .conftest import cpu_runner as _runner
from .conftest import packed_logits as _packed_logits
from .conftest import random_prompts as _prompts

SMALL_QWEN = dict(hidden_size=64, head_dim=16, intermediate_size=96, moe_intermediate_size=32)
# name -> (preset, weights, layers, experts, overrides): sliding and full attention, dense layers mixed in (Qwen3:
# mlp_only_layers, decoder_sparse_step), tied embeddings and attention biases, 8 experts with top-2 (so short
# prompts leave most experts without tokens)
CASES = {
    "qwen3-full-dense-mid": ("qwen3-moe-tiny", "bf16", 3, 8, dict(**SMALL_QWEN, mlp_only_layers=[1],
                                                                   norm_topk_prob=True)),
    "qwen3-sliding-step2": ("qwen3-moe-tiny", "bf16", 4, 8, dict(**SMALL_QWEN, decoder_sparse_step=2,
                                                                  use_sliding_window=True, sliding_window=8,
                                                                  norm_topk_prob=False, tie_word_embeddings=True,
                                                                  attention_bias=True, num_experts_per_tok=3)),
    "mixtral-full": ("mixtral-tiny", "bf16", 2, 8, dict(hidden_size=64, intermediate_size=96)),
    "mixtral-sliding": ("mixtral-tiny", "bf16", 2, 4, dict(hidden_size=64, intermediate_size=96, sliding_window=8,
                                                           num_attention_heads=8, num_key_value_heads=2)),
}
QUANTIZED = {
    "qwen3-fp8": ("qwen3-moe-tiny", "fp8", 2, 4, dict(hidden_size=128, head_dim=32, intermediate_size=256,
                                                      moe_intermediate_size=128, mlp_only_layers=[1])),
    # heads of 128 columns: q, k and v start on whole weight-scale blocks, so they are one stacked FP8 layer
    "qwen3-fp8-stacked-qkv": ("qwen3-moe-tiny", "fp8", 2, 4, dict(hidden_size=128, head_dim=128, num_attention_heads=2,
                                                                  num_key_value_heads=1, intermediate_size=256,
                                                                  moe_intermediate_size=128, mlp_only_layers=[0])),
    "qwen3-nvfp4": ("qwen3-moe-tiny", "nvfp4", 2, 8, dict(SMALL_QWEN, mlp_only_layers=[0])),
    "mixtral-nvfp4": ("mixtral-tiny", "nvfp4", 2, 4, dict(hidden_size=64, intermediate_size=96)),
}


def load_family_reference(model_dir: Path):
    """transformers' own model class for the checkpoint (Qwen3MoeForCausalLM / MixtralForCausalLM), float32,
    eager attention and experts."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager",
                                                experts_implementation="eager").eval()


def _make(ckpt_factory, spec, **extra):
    preset, weights, layers, experts, overrides = spec
    return ckpt_factory(preset=preset, experts_dtype=weights, layers=layers, experts=experts, **overrides, **extra)


@pytest.fixture(params=sorted(CASES))
def case(request, ckpt_factory):
    return request.param, _make(ckpt_factory, CASES[request.param])


def test_prefill_logits_match_transformers(case):
    name, model_dir = case
    runner = _runner(model_dir)
    assert type(runner.model).__name__ == json.loads((model_dir / "config.json").read_text())["architectures"][0]
    prompts = _prompts(runner.config.vocab_size, [1, 7, 23, 40], seed=len(name))  # past the 8-token windows
    assert_logits_match(name, _packed_logits(runner, prompts), load_family_reference(model_dir), prompts)


def test_greedy_generation_matches_transformers(case):
    from quickmoe.llm import LLM

    name, model_dir = case
    llm = LLM(model_dir, device="cpu", dtype="float32")
    prompts = _prompts(llm.config.vocab_size, [3, 11, 30], seed=7)
    assert_greedy_matches(name, llm, load_family_reference(model_dir), prompts)


@pytest.mark.parametrize("name", sorted(QUANTIZED))
def test_quantized_model_equals_transformers_on_the_dequantized_twin(name, ckpt_factory):
    quantized, twin = _make(ckpt_factory, QUANTIZED[name]), _make(ckpt_factory, QUANTIZED[name], dequantized_twin=True)
    config, twin_config = (json.loads((d / "config.json").read_text()) for d in (quantized, twin))
    assert "quantization_config" in config and "quantization_config" not in twin_config
    runner = _runner(quantized)
    attention = runner.model.model.layers[0].self_attn
    assert (attention.qkv_proj is not None) == (name != "qwen3-fp8")  # head_dim 32: k, v of 64 rows don't stack
    prompts = _prompts(runner.config.vocab_size, [1, 9, 30], seed=5)
    assert_logits_match(name, _packed_logits(runner, prompts), load_family_reference(twin), prompts)


def test_checkpoint_not_matching_its_config_fails_before_loading(ckpt_factory, tmp_path):
    src = _make(ckpt_factory, CASES["mixtral-full"])
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in src.iterdir():
        (bad / f.name).symlink_to(f)
    config = json.loads((src / "config.json").read_text())
    (bad / "config.json").unlink()
    (bad / "config.json").write_text(json.dumps({**config, "intermediate_size": 112}))
    with pytest.raises(CheckpointError) as err:
        _runner(bad)
    message = str(err.value)
    assert "model.layers.0.block_sparse_moe.experts.0.w1.weight" in message and ".safetensors" in message
    assert "[112, 64]" in message and "[96, 64]" in message


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["qwen3-full-dense-mid", "mixtral-sliding"])
def test_prefill_logits_match_transformers_cuda_bf16(name, ckpt_factory):
    """bf16 on the GPU (Triton MoE and attention kernels) against transformers float32; transformers' own bf16 run
    gives the scale: quickmoe's relative error must be of its order."""
    model_dir = _make(ckpt_factory, CASES[name])
    runner = ModelRunner(model_dir, EngineConfig(model=str(model_dir), device="cuda", dtype="bfloat16",
                                                 kv_cache_memory=1 << 30))
    prompts = _prompts(runner.config.vocab_size, [9, 64, 200], seed=11)
    ours = _packed_logits(runner, prompts)
    ref32 = load_family_reference(model_dir).cuda()
    from transformers import AutoModelForCausalLM

    hf16 = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16, attn_implementation="eager",
                                                experts_implementation="eager").cuda().eval()
    for prompt, got in zip(prompts, ours):
        ids = torch.tensor([prompt], device="cuda")
        with torch.no_grad():
            want, hf_bf16 = ref32(ids).logits[0].float(), hf16(ids).logits[0].float()
        ours_rel = ((got - want).norm() / want.norm()).item()
        hf_rel = ((hf_bf16 - want).norm() / want.norm()).item()
        print(f"\n{name} cuda L={len(prompt)}: quickmoe bf16 rel={ours_rel:.4f}; transformers bf16 rel={hf_rel:.4f}")
        assert ours_rel < max(2 * hf_rel, 1e-2), f"prompt of {len(prompt)} tokens: relative diff {ours_rel:.3g}"


@pytest.mark.gpu
@pytest.mark.parametrize("gemvs", [True, False], ids=["gemvs", "tensor-cores"])
@pytest.mark.parametrize("name", ["qwen3-fp8-stacked-qkv", "qwen3-fp8"])
def test_fp8_decode_steps_on_cuda_match_the_prefill_and_transformers(name, gemvs, ckpt_factory, monkeypatch):
    """An FP8 checkpoint's decode steps on the GPU in bf16, teacher-forced after an 8-token prefill: one sequence
    alone (the norms quantizing for the FP8 layers; with `gemvs`, the default, the MoE's and the dense layers'
    CUDA-core GEMVs of one token), then two together (the MoE's GEMV of two tokens), against transformers float32
    on the dequantized twin and against the same model's packed prefill of the whole prompts (tensor-core kernels,
    the same FP8 activation quantizer).
    - The FP8 activations (3 mantissa bits) put the prefill 4-11% from the twin on these models (H200, 2026-12-02);
      the decode steps must be no farther (1.5x, plus transformers' own bf16 distance), where a wrong scale, block
      or row gives a relative error of order 1.
    - On the tensor cores alone (both GEMVs' bounds 0) a decode step gives the prefill's logits up to bf16 noise:
      the FP8 kernels' sums do not depend on the token count. The GEMVs sum in another order, and a float32
      difference can move an activation across an FP8 rounding boundary (a 2^-4 step), so with them the decode
      steps differ from the prefill by up to the FP8 error itself (measured: 2-7%): the batch-size dependence that
      docs/architecture.md describes."""
    from quickmoe.kernels import fp8_gemm, fp8_gemv, moe_fp8_gemv
    from quickmoe.kernels import fused_moe as fused_moe_module

    calls = {"dense": 0, "moe": 0}
    for module, attr, key in ((fp8_gemv, "fp8_block_gemv", "dense"), (moe_fp8_gemv, "moe_fp8_gemv", "moe")):
        real = getattr(module, attr)
        monkeypatch.setattr(module, attr, lambda *a, _real=real, _key=key, **kw: calls.update(
            {_key: calls[_key] + 1}) or _real(*a, **kw))
    if not gemvs:
        monkeypatch.setattr(fp8_gemm, "fp8_gemv_max_tokens", lambda device: 0)
        monkeypatch.setattr(fused_moe_module, "fp8_gemv_max_tokens", lambda device: 0)
    quantized, twin = _make(ckpt_factory, QUANTIZED[name]), _make(ckpt_factory, QUANTIZED[name], dequantized_twin=True)
    runner = ModelRunner(quantized, EngineConfig(model=str(quantized), device="cuda", dtype="bfloat16",
                                                 kv_cache_memory=1 << 30))
    prompts = _prompts(runner.config.vocab_size, [20, 14, 17], seed=13)
    prefill = _packed_logits(runner, prompts)  # [L, V] each, a fresh cache
    first = 8
    steps = PagedSteps(runner)
    decoded: list[list[torch.Tensor]] = [[] for _ in prompts]
    for group in ([0], [1, 2]):  # sequence 0 alone, then 1 and 2 together until each ends
        logits = runner.forward(steps.batch([prompts[s][:first] for s in group], group))  # [B, V]
        for s, row in zip(group, logits):
            decoded[s].append(row)
        for pos in range(first, max(len(prompts[s]) for s in group) - 1):
            live = [s for s in group if pos < len(prompts[s]) - 1]
            logits = runner.forward(steps.batch([[prompts[s][pos]] for s in live], live))
            for s, row in zip(live, logits):
                decoded[s].append(row)
    assert (calls["dense"] > 0 and calls["moe"] > 0) == gemvs, calls
    ref32 = load_family_reference(twin).cuda()
    from transformers import AutoModelForCausalLM

    hf16 = AutoModelForCausalLM.from_pretrained(twin, dtype=torch.bfloat16, attn_implementation="eager",
                                                experts_implementation="eager").cuda().eval()
    rel = lambda a, b: ((a - b).norm() / b.norm()).item()  # noqa: E731
    results = []
    for s, prompt in enumerate(prompts):
        got = torch.stack(decoded[s]).float()  # [L - first, V]: positions first - 1 .. L - 2
        ids = torch.tensor([prompt], device="cuda")
        with torch.no_grad():
            want, hf_bf16 = (m(ids).logits[0, first - 1:-1].float() for m in (ref32, hf16))
        same_model = prefill[s][first - 1:-1].float()
        assert got.shape == same_model.shape and torch.isfinite(got).all()
        results.append(dict(hf_bf16=rel(hf_bf16, want), decode_vs_prefill=rel(got, same_model),
                            decode_vs_twin=rel(got, want), prefill_vs_twin=rel(same_model, want)))
        print(f"\n{name} sequence {s}: " + ", ".join(f"{k} {v:.4f}" for k, v in results[-1].items()))
    for s, r in enumerate(results):
        assert r["prefill_vs_twin"] < 0.2, f"sequence {s}: {r}"  # the FP8 model itself (4-11% measured)
        assert r["decode_vs_twin"] < 1.5 * r["prefill_vs_twin"] + 2 * r["hf_bf16"], f"sequence {s}: {r}"
        noise = max(2 * r["hf_bf16"], 1e-2)  # bf16
        bound = max(2 * r["prefill_vs_twin"], noise) if gemvs else noise
        assert r["decode_vs_prefill"] < bound, f"sequence {s}: {r}"
