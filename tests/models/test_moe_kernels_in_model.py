"""The gpt-oss model with `moe_kernels="triton"` (the Triton MoE kernels; Triton's interpreter on CPU)
against the torch reference path, on the same MXFP4 checkpoint: every MoE layer's output, and greedy tokens."""

from __future__ import annotations

import pytest
import torch

from quickmoe.config import EngineConfig
from quickmoe.errors import ConfigError
from quickmoe.executor.model_runner import ModelRunner
from quickmoe.layers.moe import FusedMoE

pytest.importorskip("triton")


def test_engine_option_is_validated():
    with pytest.raises(ConfigError, match="'moe_kernels' = 'cutlass': expected one of"):
        EngineConfig(moe_kernels="cutlass")


def test_auto_picks_the_kernels_on_cuda_and_the_reference_elsewhere():
    auto = EngineConfig()
    assert auto.moe_kernels == "auto"
    assert auto.resolved_kernels("moe_kernels", torch.device("cuda")) == "triton"  # triton is installed (importorskip)
    assert auto.resolved_kernels("moe_kernels", torch.device("cpu")) == "torch"
    assert EngineConfig(moe_kernels="torch").resolved_kernels("moe_kernels", torch.device("cuda")) == "torch"
    assert EngineConfig(moe_kernels="triton").resolved_kernels("moe_kernels", torch.device("cpu")) == "triton"


@pytest.mark.slow
@pytest.mark.parametrize("experts_dtype", ["mxfp4", "bf16"])
def test_triton_moe_matches_the_reference_in_the_model(ckpt_factory, experts_dtype):
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM

    model_dir = ckpt_factory(experts_dtype=experts_dtype, hidden_size=96, intermediate_size=96)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    small_cache = 1 << 28  # two runners alive at once: on a GPU the default cache would take most of it
    runners = {k: ModelRunner(model_dir, EngineConfig(model=str(model_dir), device=device, dtype="float32",
                                                      moe_kernels=k, kv_cache_memory=small_cache))
               for k in ("torch", "triton")}
    layers = {k: [m for m in r.model.modules() if isinstance(m, FusedMoE)] for k, r in runners.items()}
    assert layers["triton"] and all(m.kernels == "triton" for m in layers["triton"])
    g = torch.Generator().manual_seed(4)
    for ref_layer, kernel_layer in zip(layers["torch"], layers["triton"]):
        hidden = torch.randn(6, 96, generator=g).to(device)
        weights = torch.softmax(torch.randn(6, 4, generator=g), -1)[:, :2].to(device)
        ids = torch.stack([torch.randperm(4, generator=g)[:2] for _ in range(6)]).to(device)
        with torch.no_grad():
            want, got = ref_layer(hidden, weights, ids), kernel_layer(hidden, weights, ids)
        assert (got - want).norm() / want.norm() < 1e-5
    params = SamplingParams(max_tokens=6, temperature=0, ignore_eos=True)
    prompt = [int(t) for t in torch.randint(0, 1000, (9,), generator=g)]
    outs = {k: LLM(model_dir, device=device, dtype="float32", moe_kernels=k, kv_cache_memory=small_cache).generate(
        [prompt], params)[0].token_ids for k in ("torch", "triton")}
    assert outs["triton"] == outs["torch"]


# Qwen3-MoE / Mixtral checkpoints (per-expert tensors stacked, then regrouped through the PermutationCache):
# (preset, weights, overrides); FP8 needs whole 128-column blocks
FAMILY_CASES = {
    "qwen3-bf16": ("qwen3-moe-tiny", "bf16", dict(hidden_size=64, head_dim=16, moe_intermediate_size=96,
                                                  intermediate_size=64, mlp_only_layers=[1])),
    "mixtral-nvfp4": ("mixtral-tiny", "nvfp4", dict(hidden_size=64, intermediate_size=96)),
    "qwen3-fp8": ("qwen3-moe-tiny", "fp8", dict(hidden_size=128, head_dim=32, moe_intermediate_size=128,
                                                intermediate_size=128, mlp_only_layers=[])),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAMILY_CASES))
def test_triton_moe_matches_the_reference_in_family_models(ckpt_factory, name):
    """Every MoE layer through the Triton kernels against the torch path, to float rounding: bf16 and NVFP4
    (weight-only) as they are; FP8 against the reference that rounds the activations through FP8 per 128 columns
    as the kernels do (the model's torch path keeps them in float32)."""
    from quickmoe.kernels.fused_moe import fused_moe_ref

    preset, fmt, overrides = FAMILY_CASES[name]
    model_dir = ckpt_factory(preset=preset, experts_dtype=fmt, layers=2, experts=4, **overrides)
    runners = {k: ModelRunner(model_dir, EngineConfig(model=str(model_dir), device="cpu", dtype="float32",
                                                      moe_kernels=k, kv_cache_memory=1 << 26))
               for k in ("torch", "triton")}
    layers = {k: [m for m in r.model.modules() if isinstance(m, FusedMoE)] for k, r in runners.items()}
    assert layers["triton"] and all(m.kernels == "triton" for m in layers["triton"])
    g = torch.Generator().manual_seed(5)
    hidden_size = runners["torch"].config.hidden_size
    for ref_layer, kernel_layer in zip(layers["torch"], layers["triton"]):
        hidden = torch.randn(6, hidden_size, generator=g)
        weights = torch.softmax(torch.randn(6, 4, generator=g), -1)[:, :2]
        ids = torch.stack([torch.randperm(4, generator=g)[:2] for _ in range(6)])
        with torch.no_grad():
            want, got = ref_layer(hidden, weights, ids), kernel_layer(hidden, weights, ids)
            if fmt == "fp8":
                assert (got - want).norm() / want.norm() < 0.1  # FP8 activation rounding, no more
                want = fused_moe_ref(hidden, weights, ids, ref_layer.gate_up_proj, None, ref_layer.down_proj, None,
                                     w1_scales=ref_layer.gate_up_proj_scale_inv,
                                     w2_scales=ref_layer.down_proj_scale_inv, gate_up_group=64, activation="silu",
                                     fp8_activations=True)
        assert (got - want).norm() / want.norm() < 1e-5
