"""Parameters declared `dtype_follows_checkpoint` (the FP8 experts' block scales) take the dtype their checkpoint
tensors share before loading, so those land as bytes instead of one conversion each; processing then gives the
same values as loading them converted, bit for bit."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from quickmoe.checkpoint import loader as loader_module
from quickmoe.checkpoint.bindings import checkpoint_bindings
from quickmoe.checkpoint.dtype_adoption import adopt_checkpoint_dtypes
from quickmoe.checkpoint.loader import load_weights
from quickmoe.checkpoint.reader import CheckpointReader
from quickmoe.checkpoint.weight_loaders import CheckpointPart, SliceLoader
from quickmoe.config import ModelConfig
from quickmoe.errors import CheckpointError
from quickmoe.layers.weights import declare_weight
from quickmoe.models.registry import build_model


@pytest.fixture(scope="module")
def fp8_checkpoint(tmp_path_factory):
    from quickmoe.checkpoint.synth import write_checkpoint

    return write_checkpoint(tmp_path_factory.mktemp("adopt") / "model", preset="qwen3-moe-tiny", layers=2, experts=4,
                            seed=11, experts_dtype="fp8", shard_bytes=150_000, progress=False,
                            overrides=dict(vocab_size=512, hidden_size=128, head_dim=32, intermediate_size=256,
                                           moe_intermediate_size=128))


def _loaded(checkpoint, monkeypatch, adopt: bool) -> tuple[nn.Module, int, dict[str, torch.dtype]]:
    """The processed model, how many expert scale tensors went through a SliceLoader call, and the dtypes of the
    scale parameters as loaded."""
    calls = {"n": 0}
    original = SliceLoader.__call__

    def counting(self, param, loaded):
        if loaded.dtype != torch.float8_e4m3fn:
            calls["n"] += 1
        return original(self, param, loaded)

    with monkeypatch.context() as m:
        m.setattr(SliceLoader, "__call__", counting)
        if not adopt:
            m.setattr(loader_module, "adopt_checkpoint_dtypes", lambda model, reader: {})
        model = build_model(ModelConfig.from_dir(checkpoint), dtype=torch.float32, device="cpu")
        load_weights(model, CheckpointReader(checkpoint), chunk_bytes=4097, num_threads=2, num_buffers=3)
    dtypes = {n: p.dtype for n, p in model.named_parameters() if n.endswith("_scale_inv") and ".experts." in n}
    model.process_weights_after_loading()
    return model, calls["n"], dtypes


def test_fp8_expert_scales_land_as_bytes_and_process_to_the_same_bits(fp8_checkpoint, monkeypatch):
    adopted, adopted_calls, adopted_dtypes = _loaded(fp8_checkpoint, monkeypatch, adopt=True)
    converted, converted_calls, converted_dtypes = _loaded(fp8_checkpoint, monkeypatch, adopt=False)
    reader = CheckpointReader(fp8_checkpoint)
    scales = [n for n in reader.entries if ".experts." in n and n.endswith("weight_scale_inv")]
    assert scales and {reader.entries[n].dtype for n in scales} == {torch.bfloat16}  # Qwen's FP8 releases
    assert converted_calls == len(scales) and adopted_calls == 0  # one conversion each, or none
    assert set(adopted_dtypes.values()) == {torch.bfloat16} and set(converted_dtypes.values()) == {torch.float32}
    state_a, state_c = adopted.state_dict(), converted.state_dict()
    assert state_a.keys() == state_c.keys()
    for name, value in state_a.items():
        assert value.dtype == state_c[name].dtype and torch.equal(value, state_c[name]), name
    assert all(p.dtype == torch.float32 for n, p in adopted.named_parameters() if n.endswith("_scale_inv"))


def _stacked_module(tmp_path, tensors: dict[str, torch.Tensor]) -> tuple[nn.Module, CheckpointReader]:
    """A module whose parameter `scale` [2, 3] float32 stacks `0.scale` and `1.scale` [3] (bf16 declared, float32
    and float16 accepted), following its checkpoint's dtype."""
    module = nn.Module()
    parts = [CheckpointPart(f"{e}.scale", (3,), torch.bfloat16, SliceLoader(e), (torch.float32, torch.float16))
             for e in range(2)]
    declare_weight(module, "scale", (2, 3), torch.float32, "cpu", checkpoint_dtype=torch.bfloat16,
                   checkpoint_parts=parts, checkpoint_alt_dtypes=(torch.float32, torch.float16),
                   dtype_follows_checkpoint=True)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    return module, CheckpointReader(tmp_path)


@pytest.mark.parametrize("dtypes, adopted", [((torch.bfloat16, torch.bfloat16), torch.bfloat16),
                                             ((torch.float16, torch.float16), torch.float16),
                                             ((torch.float32, torch.float32), None),  # already the parameter's
                                             ((torch.bfloat16, torch.float16), None)])  # mixed: converted each
def test_a_parameter_takes_the_one_dtype_its_tensors_share(tmp_path, dtypes, adopted):
    g = torch.Generator().manual_seed(5)
    values = [torch.randn(3, generator=g).to(dt) for dt in dtypes]
    module, reader = _stacked_module(tmp_path, {f"{e}.scale": v for e, v in enumerate(values)})
    got = adopt_checkpoint_dtypes(module, reader)
    assert got == ({} if adopted is None else {"scale": adopted})
    assert module.scale.dtype == (adopted or torch.float32)
    direct = {b.direct_offset is not None for b in checkpoint_bindings(module).values()}
    assert direct == {True}  # element offsets known; the sink lands the bytes when the file's dtype matches
    load_weights(module, reader, chunk_bytes=64, num_threads=1, num_buffers=2)
    for e, value in enumerate(values):
        assert torch.equal(module.scale.data[e], value.to(module.scale.dtype))


def test_an_unexpected_dtype_is_not_adopted_and_fails_validation(tmp_path):
    module, reader = _stacked_module(tmp_path, {"0.scale": torch.arange(3, dtype=torch.int32),
                                                "1.scale": torch.arange(3, dtype=torch.int32)})
    assert adopt_checkpoint_dtypes(module, reader) == {}
    with pytest.raises(CheckpointError, match=r"wrong dtype for tensor 0\.scale"):
        load_weights(module, reader)
