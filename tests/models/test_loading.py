"""Loading a checkpoint into the model: exact values, and every CheckpointError naming its culprit."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys

import pytest
import torch

from quickmoe.checkpoint.reader import CheckpointReader
from quickmoe.config import EngineConfig
from quickmoe.errors import CheckpointError
from quickmoe.executor.model_runner import ModelRunner
from quickmoe.layouts import PermutationCache, convert_experts_


def _runner(model_dir):
    return ModelRunner(model_dir, EngineConfig(model=str(model_dir), device="cpu", dtype="float32"))


@pytest.mark.parametrize("experts_dtype", ["mxfp4", "bf16"])
def test_every_parameter_holds_its_checkpoint_tensor(ckpt_factory, experts_dtype):
    model_dir = ckpt_factory(experts_dtype=experts_dtype, hidden_size=64, intermediate_size=64)
    runner = _runner(model_dir)
    reader = CheckpointReader(model_dir)
    params = dict(runner.model.named_parameters())
    assert set(params) == set(reader.entries)
    want = {name: tensor.clone() for name, tensor in reader.iter_tensors()}
    for name in [n for n in want if n.endswith("_proj_blocks")]:  # MXFP4 experts: in the kernel layout
        proj = name.removesuffix("_blocks")
        experts = runner.model.get_submodule(proj.rsplit(".", 1)[0])
        parts = (want[name], want[f"{proj}_scales"], want[f"{proj}_bias"])
        converted = convert_experts_(*parts, gate_up=proj.endswith("gate_up_proj"),
                                     layout=experts.quant_method.layout, cache=PermutationCache(enabled=True))
        want.update(zip((name, f"{proj}_scales", f"{proj}_bias"), converted))
    for name, tensor in want.items():
        got = params[name].data
        if name.endswith(("experts.gate_up_proj", "experts.down_proj")):  # in x out -> out x in
            tensor = tensor.transpose(-1, -2)
        assert torch.equal(got, tensor.to(got.dtype)), name


def _copy(model_dir, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(model_dir, dst)
    return dst


def _rewrite_single_shard(model_dir, mutate):
    """Rewrite the (only) shard with `mutate(tensors: dict)` applied, keeping the index consistent."""
    from safetensors.torch import load_file, save_file

    index_path = model_dir / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    (shard,) = set(index["weight_map"].values())
    tensors = load_file(model_dir / shard)
    mutate(tensors)
    save_file(tensors, model_dir / shard, metadata={"format": "pt"})
    index["weight_map"] = {name: shard for name in tensors}
    index_path.write_text(json.dumps(index))
    return shard


def test_unexpected_tensor_is_named(ckpt_factory, tmp_path):
    d = _copy(ckpt_factory(hidden_size=64, intermediate_size=64), tmp_path)
    shard = _rewrite_single_shard(d, lambda t: t.update({"model.layers.0.mlp.extra.weight": torch.ones(3)}))
    with pytest.raises(CheckpointError) as err:
        _runner(d)
    assert "model.layers.0.mlp.extra.weight" in str(err.value) and shard in str(err.value)


def test_missing_tensor_is_named(ckpt_factory, tmp_path):
    d = _copy(ckpt_factory(hidden_size=64, intermediate_size=64), tmp_path)
    _rewrite_single_shard(d, lambda t: t.pop("model.layers.1.self_attn.sinks"))
    with pytest.raises(CheckpointError, match=r"model\.layers\.1\.self_attn\.sinks"):
        _runner(d)


def test_wrong_shape_and_dtype_are_named(ckpt_factory, tmp_path):
    d = _copy(ckpt_factory(hidden_size=64, intermediate_size=64), tmp_path)

    def mutate(t):
        t["model.layers.0.mlp.router.bias"] = torch.randn(5).to(torch.bfloat16)
        t["model.norm.weight"] = t["model.norm.weight"].float()

    _rewrite_single_shard(d, mutate)
    with pytest.raises(CheckpointError) as err:
        _runner(d)
    msg = str(err.value)
    assert "model.layers.0.mlp.router.bias" in msg and "model.norm.weight" in msg  # both reported at once


def test_truncated_shard_is_named_before_loading(ckpt_factory, tmp_path):
    d = _copy(ckpt_factory(hidden_size=64, intermediate_size=64), tmp_path)
    shard = next(d.glob("model-*.safetensors"))
    os.truncate(shard, shard.stat().st_size - 100)
    with pytest.raises(CheckpointError) as err:
        _runner(d)
    assert shard.name in str(err.value)


def test_header_length_corruption_is_named(ckpt_factory, tmp_path):
    d = _copy(ckpt_factory(hidden_size=64, intermediate_size=64), tmp_path)
    shard = next(d.glob("model-*.safetensors"))
    with open(shard, "r+b") as f:
        f.write(struct.pack("<Q", 2**40))
    with pytest.raises(CheckpointError, match=shard.name):
        _runner(d)


def test_cli_prints_one_line_error_without_traceback(ckpt_factory, tmp_path):
    d = _copy(ckpt_factory(hidden_size=64, intermediate_size=64), tmp_path)
    _rewrite_single_shard(d, lambda t: t.pop("lm_head.weight"))
    proc = subprocess.run([sys.executable, "-m", "quickmoe", "generate", str(d), "--prompt", "hi", "-q"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "lm_head.weight" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_llm_takes_up_the_early_start(ckpt_factory):
    """The runner stops the early start's prefetch, records what it did, and the LLM uses the tokenizer it
    loaded; the model is the same as without an early start."""
    from quickmoe.llm import LLM
    from quickmoe.startup.early_start import EarlyStart

    model_dir = ckpt_factory(experts_dtype="mxfp4", hidden_size=64, intermediate_size=64)
    early = EarlyStart.begin(model_dir, "cpu")
    llm = LLM(model_dir, device="cpu", early_start=early)
    info = llm.startup_report.info["early_start"]
    shard_bytes = sum(f.stat().st_size for f in model_dir.glob("*.safetensors"))
    assert info["prefetch"]["read_bytes"] + info["prefetch"]["resident_bytes"] <= shard_bytes
    assert early.prefetch is not None and early.prefetch.join(timeout=0)  # stopped and joined
    assert llm.tokenizer is early.tokenizer.result()
    plain = LLM(model_dir, device="cpu")
    ids = [int(t) for t in torch.randint(0, llm.config.vocab_size - 2, (12,), generator=torch.Generator().manual_seed(7))]
    from quickmoe.engine.sampling_params import SamplingParams

    params = SamplingParams(max_tokens=4, temperature=0, ignore_eos=True)
    assert llm.generate([ids], params)[0].token_ids == plain.generate([ids], params)[0].token_ids


def test_a_failed_load_still_winds_up_the_early_start(ckpt_factory, tmp_path, monkeypatch):
    import quickmoe.executor.runner_start as runner_mod
    from quickmoe.startup.early_start import EarlyStart

    model_dir = ckpt_factory(experts_dtype="mxfp4", hidden_size=64, intermediate_size=64)
    broken = tmp_path / "broken"
    shutil.copytree(model_dir, broken)
    shard = sorted(broken.glob("*.safetensors"))[-1]
    data = shard.read_bytes()
    original = runner_mod.load_weights

    def truncating_load(*args, **kwargs):  # the shard shrinks after its header was validated
        shard.write_bytes(data[: len(data) // 2])
        return original(*args, **kwargs)

    monkeypatch.setattr(runner_mod, "load_weights", truncating_load)
    early = EarlyStart.begin(broken, "cpu")
    with pytest.raises(CheckpointError, match="short read|truncated"):
        ModelRunner(broken, EngineConfig(model=str(broken), device="cpu", dtype="float32"), early_start=early)
    assert early.prefetch is not None and early.prefetch.join(timeout=0)  # stopped on the error path too


def test_a_bad_checkpoint_directory_still_winds_up_the_early_start(ckpt_factory, tmp_path):
    from quickmoe.errors import ConfigError
    from quickmoe.startup.early_start import EarlyStart

    model_dir = ckpt_factory(experts_dtype="mxfp4", hidden_size=64, intermediate_size=64)
    broken = tmp_path / "no-config"
    shutil.copytree(model_dir, broken)
    (broken / "config.json").unlink()
    early = EarlyStart.begin(broken, "cpu")
    with pytest.raises(ConfigError, match="config.json"):
        ModelRunner(broken, EngineConfig(model=str(broken), device="cpu", dtype="float32"), early_start=early)
    assert early.prefetch is not None and early.prefetch.join(timeout=0)
