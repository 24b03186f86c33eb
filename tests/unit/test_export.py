"""checkpoint/export.py: trained float weights written as a gpt-oss checkpoint by quickmoe's writer (experts
quantized to MXFP4 out x in, everything else bf16), checked tensor by tensor; bad inputs are named."""

from __future__ import annotations

import copy

import pytest
import torch

from quickmoe.checkpoint.export import write_trained_checkpoint
from quickmoe.checkpoint.synth import preset_config, tensor_specs
from quickmoe.errors import ConfigError
from quickmoe.formats.mxfp4 import dequantize_mxfp4


def _config() -> dict:
    return preset_config("tiny", layers=1, experts=2, hidden_size=64, intermediate_size=64, num_attention_heads=2,
                         num_key_value_heads=1, head_dim=32, num_experts_per_tok=1, vocab_size=128)


def _tensors(cfg: dict) -> dict[str, torch.Tensor]:
    bf16 = copy.deepcopy(cfg)
    del bf16["quantization_config"]
    g = torch.Generator().manual_seed(0)
    return {s.name: torch.randn(s.shape, generator=g) * 0.1 for s in tensor_specs(bf16)}


def test_export_quantizes_the_experts_out_by_in_and_writes_the_rest_in_bf16(tmp_path):
    from safetensors.torch import load_file

    cfg = _config()
    tensors = _tensors(cfg)
    out = write_trained_checkpoint(tmp_path / "m", cfg, tensors, extra_files={"note.txt": b"hi"})
    saved = {}
    for shard in out.glob("*.safetensors"):
        saved.update(load_file(shard))
    assert set(saved) == {s.name for s in tensor_specs(cfg)} and (out / "note.txt").read_bytes() == b"hi"
    x = "model.layers.0.mlp.experts"
    for proj in ("gate_up_proj", "down_proj"):
        w = tensors[f"{x}.{proj}"]  # [E, K, N] in x out
        got = dequantize_mxfp4(saved[f"{x}.{proj}_blocks"], saved[f"{x}.{proj}_scales"])  # [E, N, K]
        assert got.shape == w.transpose(1, 2).shape
        assert (got - w.transpose(1, 2)).abs().max() <= 0.25 * w.abs().max()  # 4-bit rounding, not a transpose bug
        assert torch.corrcoef(torch.stack([got.flatten(), w.transpose(1, 2).flatten()]))[0, 1] > 0.98
    emb = saved["model.embed_tokens.weight"]
    assert emb.dtype == torch.bfloat16 and torch.equal(emb, tensors["model.embed_tokens.weight"].bfloat16())


def test_export_names_a_missing_unused_or_misshapen_tensor(tmp_path):
    cfg = _config()
    tensors = _tensors(cfg)
    with pytest.raises(ConfigError, match="not part of the checkpoint"):
        write_trained_checkpoint(tmp_path / "a", cfg, {**tensors, "model.extra": torch.zeros(1)})
    missing = dict(tensors)
    del missing["model.norm.weight"]
    with pytest.raises(ConfigError, match="model.norm.weight"):
        write_trained_checkpoint(tmp_path / "b", cfg, missing)
    bad = {**tensors, "lm_head.weight": torch.zeros(3, 3)}
    with pytest.raises(ConfigError, match="lm_head.weight.*shape"):
        write_trained_checkpoint(tmp_path / "c", cfg, bad)
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()
