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
