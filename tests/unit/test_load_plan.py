"""The loader's cached plan (checkpoint/load_plan.py): a second load of the same checkpoint, model and code streams
from the plan the first one wrote, with every parameter bit for bit as the full per-tensor path fills it (direct
pieces, and pieces handed to weight loaders: the float32 norms of a bf16 model, tensors split across chunks); the
key changes with whatever decides the plan; a damaged, foreign or switched-off plan is never used."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from quickmoe.checkpoint import load_plan
from quickmoe.checkpoint.loader import load_weights
from quickmoe.checkpoint.reader import CheckpointReader
from quickmoe.config import ModelConfig
from quickmoe.models.registry import build_model


@pytest.fixture(scope="module", params=["bf16", "nvfp4"])
def checkpoint(request, tmp_path_factory):
    from quickmoe.checkpoint.synth import write_checkpoint

    return write_checkpoint(tmp_path_factory.mktemp("plan") / "model", preset="qwen3-moe-tiny", layers=2, experts=8,
                            experts_dtype=request.param, seed=3,
                            overrides=dict(vocab_size=512, hidden_size=64, intermediate_size=48, head_dim=16,
                                           moe_intermediate_size=32),
                            shard_bytes=150_000, progress=False)


@pytest.fixture
def plans(tmp_path, monkeypatch):
    """A fresh cache directory, and plans kept for checkpoints of any size."""
    monkeypatch.setenv("QUICKMOE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("QUICKMOE_LOAD_PLAN_CACHE", "1")
    monkeypatch.setattr(load_plan, "MIN_TENSORS", 1)
    return tmp_path / "cache" / "load-plans"


def _load(checkpoint, chunk_bytes=4097, dtype=torch.bfloat16, device="cpu"):
    model = build_model(ModelConfig.from_dir(checkpoint), dtype=dtype, device=device)
    stats = load_weights(model, CheckpointReader(checkpoint), chunk_bytes=chunk_bytes, num_threads=2, num_buffers=3)
    return model, stats


def _bits(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().reshape(-1).view(torch.uint8).clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("chunk_bytes", [4097, 1 << 20])
def test_a_second_load_streams_from_the_plan_with_the_same_bits(checkpoint, plans, chunk_bytes):
    """Chunks of 4,097 bytes split tensors anywhere (pieces in two chunks, delivered tensors assembled)."""
    first, stats = _load(checkpoint, chunk_bytes)
    assert not stats.plan_cached and len(list(plans.glob("*.npz"))) == 1
    want = _bits(first)
    for name, param in first.named_parameters():  # nothing left unfilled (torch.empty garbage aside): non-zero
        assert want[name].any(), name
    second, stats2 = _load(checkpoint, chunk_bytes)
    assert stats2.plan_cached
    assert stats2.num_tensors == stats.num_tensors == len(CheckpointReader(checkpoint).entries)
    assert stats2.num_bytes == stats.num_bytes and stats2.num_chunks == stats.num_chunks
    got = _bits(second)
    assert got.keys() == want.keys()
    for name in want:
        assert torch.equal(got[name], want[name]), name


@pytest.mark.gpu
def test_a_second_load_on_the_gpu_streams_from_the_plan_with_the_same_bits(checkpoint, plans):
    """On CUDA the plan's direct copies go to the driver as address arrays (batched), the delivered pieces through
    the device staging buffers: the same bits as the per-tensor path there."""
    first, stats = _load(checkpoint, device="cuda")
    second, stats2 = _load(checkpoint, device="cuda")
    assert not stats.plan_cached and stats2.plan_cached
    want, got = _bits(first), _bits(second)
    for name in want:
        assert torch.equal(got[name], want[name]), name


def test_the_plan_holds_direct_and_delivered_pieces(checkpoint, plans):
    """A bf16 model takes its norms as float32 (weight loaders convert them): delivered pieces, beside the direct
    ones of every other tensor."""
    _load(checkpoint)
    (path,) = plans.glob("*.npz")
    plan = load_plan.LoadPlan.load(path)
    assert plan is not None and len(plan.piece_param) and len(plan.deliv_name)
    assert all("norm" in name for name in plan.deliv_name.tolist())


def test_the_key_follows_what_decides_the_plan(checkpoint, plans, monkeypatch, tmp_path):
    reader = CheckpointReader(checkpoint)
    model = build_model(ModelConfig.from_dir(checkpoint), dtype=torch.bfloat16, device="cpu")
    cpu = torch.device("cpu")
    key = load_plan.plan_key(model, reader, 4097, cpu)
    assert key == load_plan.plan_key(model, reader, 4097, cpu)  # stable
    assert key != load_plan.plan_key(model, reader, 4096, cpu)
    assert key != load_plan.plan_key(model, reader, 4097, torch.device("meta"))
    other = build_model(ModelConfig.from_dir(checkpoint), dtype=torch.float32, device="cpu")
    assert key != load_plan.plan_key(other, reader, 4097, cpu)
    monkeypatch.setattr(load_plan, "sources_digest", lambda: "edited")
    assert key != load_plan.plan_key(model, reader, 4097, cpu)
    monkeypatch.undo()
    monkeypatch.setattr(load_plan, "MIN_TENSORS", 1)
    monkeypatch.setenv("QUICKMOE_CACHE_DIR", str(tmp_path / "cache"))
    # a header that differs in one byte (a tensor renamed in place: same length) is another checkpoint
    import json
    import shutil

    moved = shutil.copytree(checkpoint, tmp_path / "renamed")
    shard = sorted(moved.glob("*.safetensors"))[0]
    data = shard.read_bytes()
    name = next(n for n in json.loads(data[8:8 + int.from_bytes(data[:8], "little")]) if n != "__metadata__")
    renamed = "X" + name[1:]
    shard.write_bytes(data.replace(f'"{name}"'.encode(), f'"{renamed}"'.encode(), 1))
    index = moved / "model.safetensors.index.json"
    index.write_text(index.read_text().replace(f'"{name}"', f'"{renamed}"'))
    assert load_plan.plan_key(model, CheckpointReader(moved), 4097, cpu) != key


def test_a_damaged_or_foreign_plan_is_not_used(checkpoint, plans, caplog):
    want = _bits(_load(checkpoint)[0])
    (path,) = plans.glob("*.npz")
    plan = load_plan.LoadPlan.load(path)
    path.write_bytes(b"not a plan")  # unreadable: a miss, planned again and rewritten
    model, stats = _load(checkpoint)
    assert not stats.plan_cached and load_plan.LoadPlan.load(path) is not None
    assert all(torch.equal(b, want[n]) for n, b in _bits(model).items())
    bad = dict(vars(plan))
    bad["piece_param"] = plan.piece_param + 10_000  # indices past the model's parameters
    load_plan.LoadPlan(**bad).save(path)
    model, stats = _load(checkpoint)
    assert not stats.plan_cached and "does not fit" in caplog.text
    assert all(torch.equal(b, want[n]) for n, b in _bits(model).items())
    bad = dict(vars(plan))
    bad["piece_offset"] = plan.piece_offset + np.int64(1 << 30)  # past the end of the parameters
    load_plan.LoadPlan(**bad).save(path)
    assert not _load(checkpoint)[1].plan_cached


def test_the_plan_is_kept_and_used_by_default(checkpoint, plans, monkeypatch):
    monkeypatch.delenv("QUICKMOE_LOAD_PLAN_CACHE")  # on unless switched off (measured on the H200: a faster load)
    assert not _load(checkpoint)[1].plan_cached and plans.exists()
    assert _load(checkpoint)[1].plan_cached


def test_no_plan_is_kept_when_switched_off_or_for_few_tensors(checkpoint, plans, monkeypatch):
    monkeypatch.setenv("QUICKMOE_LOAD_PLAN_CACHE", "0")
    assert not _load(checkpoint)[1].plan_cached and not plans.exists()
    monkeypatch.setenv("QUICKMOE_LOAD_PLAN_CACHE", "1")
    monkeypatch.setattr(load_plan, "MIN_TENSORS", len(CheckpointReader(checkpoint).entries) + 1)
    assert not _load(checkpoint)[1].plan_cached and not plans.exists()
