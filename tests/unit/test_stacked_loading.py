"""Per-expert checkpoint tensors (Qwen3-MoE, Mixtral) stacked into one parameter per projection at load: every
expert's tensors land in their rows, bit for bit, whether they are delivered through their weight loaders
(dtype conversion: float32 parameters) or land directly as byte runs of the parameter (same dtype: bf16), with
chunks that split tensors anywhere; every tensor is used and every parameter filled."""

from __future__ import annotations

import pytest
import torch

from quickmoe.checkpoint.bindings import checkpoint_bindings
from quickmoe.checkpoint.loader import load_weights
from quickmoe.checkpoint.reader import CheckpointReader
from quickmoe.config import ModelConfig
from quickmoe.errors import CheckpointError
from quickmoe.models.registry import build_model


@pytest.fixture(scope="module", params=["qwen3-moe-tiny", "mixtral-tiny"])
def checkpoint(request, tmp_path_factory):
    from quickmoe.checkpoint.synth import write_checkpoint

    overrides = dict(vocab_size=512, hidden_size=64, intermediate_size=48)
    if request.param == "qwen3-moe-tiny":
        overrides.update(head_dim=16, moe_intermediate_size=32)
    return write_checkpoint(tmp_path_factory.mktemp("stacked") / "model", preset=request.param, layers=2, experts=4,
                            overrides=overrides, shard_bytes=200_000, progress=False)


@pytest.mark.parametrize("dtype, chunk_bytes", [(torch.bfloat16, 4097), (torch.bfloat16, 1 << 20),
                                                (torch.float32, 4097)])
def test_per_expert_tensors_fill_their_rows(checkpoint, dtype, chunk_bytes):
    config = ModelConfig.from_dir(checkpoint)
    model = build_model(config, dtype=dtype, device="cpu")
    reader = CheckpointReader(checkpoint)
    bindings = checkpoint_bindings(model)
    stacked = {n: b for n, b in bindings.items() if ".experts." in n}
    moe_layers = sum(config.is_moe_layer(i) for i in range(config.num_hidden_layers))
    assert moe_layers and len(stacked) == moe_layers * 4 * 3  # layers x experts x projections: each its own tensor
    direct = {b.direct_offset is not None for b in stacked.values()}
    assert direct == {dtype == torch.bfloat16}  # same dtype: byte runs of the parameter, landing directly
    stats = load_weights(model, reader, chunk_bytes=chunk_bytes, num_threads=2, num_buffers=3)
    assert stats.num_tensors == len(reader.entries)
    params = dict(model.named_parameters())
    for name, binding in stacked.items():
        param = params[binding.param_name]
        loader = binding.weight_loader
        rows = param.data[loader.index][loader.rows[0]:loader.rows[1]]
        assert torch.equal(rows, reader.read(name).to(dtype)), name


def test_a_single_ranks_view_is_the_per_binding_resolution(checkpoint):
    """rank_view's shortcut for one rank (nothing narrowed or skipped) gives what resolving each binding gives."""
    from quickmoe.checkpoint import narrow

    model = build_model(ModelConfig.from_dir(checkpoint), dtype=torch.bfloat16, device="cpu")
    reader = CheckpointReader(checkpoint)
    bindings = checkpoint_bindings(model)
    fast = narrow.rank_view(bindings, reader.entries, reader.entries_by_file)
    slow = narrow._resolve(bindings, reader.entries, reader.entries_by_file)
    assert list(fast.bindings) == list(slow.bindings)
    assert all(fast.bindings[name] is slow.bindings[name] for name in slow.bindings)
    assert (fast.entries, fast.entries_by_file, fast.names, fast.skipped, fast.runs) == (
        slow.entries, slow.entries_by_file, slow.names, slow.skipped, slow.runs)
    assert len(fast.names) == len(reader.entries)


def test_a_missing_expert_tensor_is_named(checkpoint, tmp_path):
    import json

    config = json.loads((checkpoint / "config.json").read_text())
    experts_field = "num_experts" if "num_experts" in config else "num_local_experts"
    (tmp_path / "config.json").write_text(json.dumps({**config, experts_field: 5}))
    for f in checkpoint.iterdir():
        if f.name != "config.json":
            (tmp_path / f.name).symlink_to(f)
    model = build_model(ModelConfig.from_dir(tmp_path), dtype=torch.float32, device="cpu")
    with pytest.raises(CheckpointError, match=r"missing tensor model\.layers\.\d\.\w+\.experts\.4\.\w+\.weight"):
        load_weights(model, CheckpointReader(tmp_path))
