"""Synthetic gpt-oss checkpoints: exact Hugging Face names/shapes/dtypes, shard plan, streamed safetensors
files, determinism, and transformers loading and running what we write."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import sys
import time
from pathlib import Path

import pytest
import torch

from quickmoe.checkpoint import random_weights, synth
from quickmoe.checkpoint.safetensors_writer import plan_shards, tensor_nbytes, write_shard
from quickmoe.checkpoint.synth import PRESETS, preset_config, tensor_specs, write_checkpoint
from quickmoe.config import ModelConfig
from quickmoe.errors import ConfigError
from quickmoe.formats.mxfp4 import dequantize_mxfp4

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Small enough for a CPU forward in well under a second, large enough to mean something.
SMALL = dict(vocab_size=512, hidden_size=64, intermediate_size=64)
EXPERT_SUFFIXES = ("gate_up_proj_blocks", "gate_up_proj_scales", "gate_up_proj_bias", "down_proj_blocks",
                   "down_proj_scales", "down_proj_bias")


@pytest.fixture(autouse=True)
def _no_tokenizer(monkeypatch):
    """The tokenizer files are another module's job: keep these tests independent of it."""
    monkeypatch.setattr(synth, "_write_tokenizer", lambda out_dir: None)


def _small(tmp_path: Path, name: str = "ckpt", *, experts_dtype: str = "mxfp4", layers: int = 2, experts: int = 8,
           seed: int = 0, **kw) -> Path:
    return write_checkpoint(tmp_path / name, layers=layers, experts=experts, seed=seed, experts_dtype=experts_dtype,
                            overrides={**SMALL, **kw.pop("overrides", {})}, progress=False, **kw)


def _digests(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}


def _read_all(d: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    out: dict[str, torch.Tensor] = {}
    for shard in sorted(d.glob("*.safetensors")):
        out.update(load_file(shard))
    return out


# --- specs and plans (no data written) ---------------------------------------------------------------

def test_gpt_oss_20b_spec_matches_the_published_checkpoint():
    cfg = preset_config("gpt-oss-20b")
    specs = tensor_specs(cfg)
    assert len(specs) == 459 == 24 * 19 + 3
    total = sum(tensor_nbytes(s.shape, s.dtype) for s in specs)
    assert total == 13_761_264_768
    by_name = {s.name: (s.shape, s.dtype) for s in specs}
    assert len(by_name) == len(specs)
    assert by_name["model.embed_tokens.weight"] == ((201088, 2880), "BF16")
    assert by_name["lm_head.weight"] == ((201088, 2880), "BF16")
    assert by_name["model.norm.weight"] == ((2880,), "BF16")
    p = "model.layers.23"
    assert by_name[f"{p}.self_attn.q_proj.weight"] == ((4096, 2880), "BF16")
    assert by_name[f"{p}.self_attn.k_proj.weight"] == ((512, 2880), "BF16")
    assert by_name[f"{p}.self_attn.v_proj.bias"] == ((512,), "BF16")
    assert by_name[f"{p}.self_attn.o_proj.weight"] == ((2880, 4096), "BF16")
    assert by_name[f"{p}.self_attn.sinks"] == ((64,), "BF16")
    assert by_name[f"{p}.mlp.router.weight"] == ((32, 2880), "BF16")
    assert by_name[f"{p}.mlp.router.bias"] == ((32,), "BF16")
    x = f"{p}.mlp.experts"
    assert by_name[f"{x}.gate_up_proj_blocks"] == ((32, 5760, 90, 16), "U8")
    assert by_name[f"{x}.gate_up_proj_scales"] == ((32, 5760, 90), "U8")
    assert by_name[f"{x}.gate_up_proj_bias"] == ((32, 5760), "BF16")
    assert by_name[f"{x}.down_proj_blocks"] == ((32, 2880, 90, 16), "U8")
    assert by_name[f"{x}.down_proj_scales"] == ((32, 2880, 90), "U8")
    assert by_name[f"{x}.down_proj_bias"] == ((32, 2880), "BF16")

    plan = plan_shards(specs, 5_000_000_000)
    assert [s.file_name for s in plan] == [f"model-0000{k}-of-00003.safetensors" for k in (1, 2, 3)]
    assert all(3_500_000_000 < s.data_bytes <= 5_000_000_000 for s in plan)
    assert sum(s.data_bytes for s in plan) == total
    assert [t.name for s in plan for t in s.tensors] == [s.name for s in specs]


def test_gpt_oss_120b_spec():
    specs = tensor_specs(preset_config("gpt-oss-120b"))
    assert len(specs) == 36 * 19 + 3
    by_name = {s.name: s.shape for s in specs}
    assert by_name["model.layers.35.mlp.experts.gate_up_proj_blocks"] == (128, 5760, 90, 16)
    assert by_name["model.layers.35.mlp.router.weight"] == (128, 2880)


def test_preset_configs_are_the_published_ones():
    cfg = preset_config("gpt-oss-20b")
    assert cfg["architectures"] == ["GptOssForCausalLM"] and cfg["model_type"] == "gpt_oss"
    assert (cfg["num_hidden_layers"], cfg["num_local_experts"], cfg["hidden_size"], cfg["intermediate_size"]) == \
        (24, 32, 2880, 2880)
    assert cfg["experts_per_token"] == cfg["num_experts_per_tok"] == 4
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (64, 8, 64)
    assert cfg["layer_types"] == ["sliding_attention", "full_attention"] * 12
    assert cfg["rope_scaling"] == {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                                   "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": False}
    assert (cfg["rope_theta"], cfg["sliding_window"], cfg["swiglu_limit"], cfg["rms_norm_eps"]) == \
        (150000, 128, 7.0, 1e-5)
    assert (cfg["eos_token_id"], cfg["pad_token_id"], cfg["vocab_size"]) == (200002, 199999, 201088)
    assert (cfg["max_position_embeddings"], cfg["initial_context_length"]) == (131072, 4096)
    assert cfg["attention_bias"] is True and cfg["tie_word_embeddings"] is False and cfg["hidden_act"] == "silu"
    assert cfg["quantization_config"] == {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    big = preset_config("gpt-oss-120b")
    assert (big["num_hidden_layers"], big["num_local_experts"]) == (36, 128)
    assert {k: v for k, v in big.items() if k not in ("num_hidden_layers", "num_local_experts", "layer_types")} == \
        {k: v for k, v in cfg.items() if k not in ("num_hidden_layers", "num_local_experts", "layer_types")}
    tiny = ModelConfig.from_dict(preset_config("tiny"))
    assert (tiny.vocab_size, tiny.hidden_size, tiny.intermediate_size, tiny.num_attention_heads,
            tiny.num_key_value_heads, tiny.head_dim, tiny.num_hidden_layers, tiny.num_local_experts,
            tiny.num_experts_per_tok, tiny.sliding_window) == (201088, 128, 128, 4, 2, 32, 4, 8, 4, 128)
    assert tiny.layer_types == ("sliding_attention", "full_attention") * 2
    assert tiny.rope.rope_type == "yarn" and tiny.rope.factor == 32.0
    assert set(PRESETS) == {"tiny", "gpt-oss-20b", "gpt-oss-120b", "qwen3-30b-a3b", "qwen3-moe-tiny", "mixtral-8x7b",
                            "mixtral-tiny"}


def test_bf16_experts_use_the_unquantized_hf_layout():
    cfg = preset_config("gpt-oss-20b", layers=1, experts_dtype="bf16")
    assert "quantization_config" not in cfg
    by_name = {s.name: (s.shape, s.dtype) for s in tensor_specs(cfg)}
    x = "model.layers.0.mlp.experts"
    assert by_name[f"{x}.gate_up_proj"] == ((32, 2880, 5760), "BF16")  # [E, H, 2I], in x out
    assert by_name[f"{x}.gate_up_proj_bias"] == ((32, 5760), "BF16")
    assert by_name[f"{x}.down_proj"] == ((32, 2880, 2880), "BF16")  # [E, I, H]
    assert by_name[f"{x}.down_proj_bias"] == ((32, 2880), "BF16")
    assert not any(n.endswith(("_blocks", "_scales")) for n in by_name)
    transformers = pytest.importorskip("transformers")
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts

    small = preset_config("tiny", experts=4, experts_dtype="bf16", hidden_size=64, intermediate_size=96)
    hf = GptOssExperts(transformers.GptOssConfig(**small))
    ours = {s.name.rsplit(".", 1)[1]: s.shape for s in tensor_specs(small) if ".0.mlp.experts." in s.name}
    assert ours == {n: tuple(p.shape) for n, p in hf.named_parameters()}


def test_overrides_layers_and_small_vocab():
    cfg = preset_config("tiny", layers=3, experts=6, num_experts_per_tok=2, vocab_size=512)
    assert cfg["layer_types"] == ["sliding_attention", "full_attention", "sliding_attention"]
    assert cfg["num_local_experts"] == 6 and cfg["num_experts_per_tok"] == cfg["experts_per_token"] == 2
    assert (cfg["eos_token_id"], cfg["pad_token_id"]) == (510, 511)  # the published ids do not fit any more
    kinds = ["full_attention"] * 2
    assert preset_config("tiny", layers=2, layer_types=kinds)["layer_types"] == kinds


@pytest.mark.parametrize("kwargs, words", [
    (dict(preset="gpt-oss-7b"), ["preset", "gpt-oss-7b", "tiny", "gpt-oss-20b"]),
    (dict(experts_dtype="fp8"), ["experts_dtype", "fp8", "mxfp4", "bf16"]),
    (dict(layers=0), ["layers", "0", "positive"]),
    (dict(layers="2"), ["layers", "'2'"]),
    (dict(layers=True), ["layers", "True"]),
    (dict(experts=-1), ["experts", "-1"]),
    (dict(hiden_size=64), ["hiden_size", "hidden_size"]),
    (dict(hidden_size=48), ["hidden_size", "48", "32"]),
    (dict(num_key_value_heads=3), ["num_key_value_heads", "3"]),
    (dict(experts=2), ["num_experts_per_tok", "4"]),
    (dict(layer_types=["sliding_attention"]), ["layer_types"]),
])
def test_bad_options_raise_config_error_naming_the_value(kwargs, words):
    kwargs = {"preset": "tiny", **kwargs}
    with pytest.raises(ConfigError) as info:
        preset_config(kwargs.pop("preset"), **kwargs)
    for word in words:
        assert word in str(info.value)


def test_write_checkpoint_rejects_bad_options_before_writing(tmp_path):
    for kw, word in ((dict(preset="huge"), "huge"), (dict(experts_dtype="int4"), "int4"), (dict(layers=0), "layers"),
                     (dict(seed=-1), "seed"), (dict(shard_bytes=0), "shard_bytes")):
        with pytest.raises(ConfigError, match=word):
            write_checkpoint(tmp_path / "x", progress=False, **kw)
    assert list(tmp_path.iterdir()) == []


# --- the streaming safetensors writer ----------------------------------------------------------------

def test_plan_shards_fills_in_order_and_isolates_big_tensors():
    specs = [("a", (10,), "BF16"), ("b", (100,), "U8"), ("c", (300,), "U8"), ("d", (4,), "BF16")]
    plan = plan_shards(specs, 150)
    assert [s.tensor_names for s in plan] == [["a", "b"], ["c"], ["d"]]
    assert [(t.begin, t.end) for t in plan[0].tensors] == [(0, 20), (20, 120)]
    assert plan[2].file_name == "model-00003-of-00003.safetensors"
    with pytest.raises(ValueError, match="twice"):
        plan_shards([("a", (1,), "U8"), ("a", (1,), "U8")], 100)
    with pytest.raises(ValueError, match="offset 3"):
        plan_shards([("a", (3,), "U8"), ("b", (1,), "BF16")], 100)


def test_write_shard_checks_the_chunks(tmp_path):
    shard = plan_shards([("a", (2, 3), "BF16"), ("b", (5,), "U8")], 100)[0]
    write_shard(tmp_path / "ok.safetensors", shard, iter([("a", b"\0" * 8), ("a", b"\1" * 4), ("b", b"\2" * 5)]))
    from safetensors.torch import load_file

    got = load_file(tmp_path / "ok.safetensors")
    assert got["a"].shape == (2, 3) and got["a"].dtype == torch.bfloat16 and got["b"].tolist() == [2] * 5
    for chunks, match in (([("a", b"\0" * 14)], "expects 12 bytes"), ([("b", b"\0" * 12)], "expects 12"),
                          ([("a", b"\0" * 12)], "ended at tensor 'b'")):
        with pytest.raises(ValueError, match=match):
            write_shard(tmp_path / "bad.safetensors", shard, iter(chunks))


# --- written checkpoints -----------------------------------------------------------------------------

def test_tiny_checkpoint_is_deterministic(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="quickmoe.checkpoint.synth"):
        a = write_checkpoint(tmp_path / "a", progress=False)  # the full tiny preset, real vocabulary
    assert any("79 tensors, 1 shard(s)" in r.getMessage() and "GB/s" in r.getMessage() for r in caplog.records)
    b = write_checkpoint(tmp_path / "b", progress=False)
    c = write_checkpoint(tmp_path / "c", seed=1, progress=False)
    da, db, dc = _digests(a), _digests(b), _digests(c)
    assert set(da) == {"config.json", "generation_config.json", "model-00001-of-00001.safetensors",
                       "model.safetensors.index.json"}
    assert da == db
    assert da["model-00001-of-00001.safetensors"] != dc["model-00001-of-00001.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "c"]  # no temporary directories left


def test_thread_count_does_not_change_the_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(random_weights, "CHUNK_ELEMENTS", 1000)  # many small chunks, finishing out of order
    a = _small(tmp_path, "a", experts_dtype="bf16")
    monkeypatch.setattr(synth, "_MAX_WORKERS", 1)
    b = _small(tmp_path, "b", experts_dtype="bf16")
    assert _digests(a) == _digests(b)


def test_the_once_cache_computes_a_key_once_for_threads_asking_together():
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from quickmoe.checkpoint.random_quantized import _OnceCache

    cache, calls, arrived = _OnceCache(size=4), [], threading.Barrier(4)

    def compute():
        calls.append(1)
        time.sleep(0.05)  # the other threads ask while this one computes
        return {"weight": torch.randn(3)}

    def ask(_):
        arrived.wait()
        return cache.get("w", compute)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(ask, range(4)))
    assert len(calls) == 1 and all(r is results[0] for r in results)

    def failing():
        raise ValueError("bad weight")

    with pytest.raises(ValueError, match="bad weight"):
        cache.get("x", failing)
    assert cache.get("x", compute)["weight"].shape == (3,)  # a failure is not kept: computed again
    for key in "abcd":
        cache.get(key, compute)
    assert len(calls) == 6 and cache.get("w", compute) is not results[0]  # "w" was evicted: 4 entries at most


@pytest.mark.parametrize("weights", ["fp8", "nvfp4"])
def test_each_quantized_weight_is_quantized_once(tmp_path, monkeypatch, weights):
    """The generator's threads ask for a weight and its scales together; the quantization runs once per weight."""
    from quickmoe.checkpoint import random_quantized

    monkeypatch.setattr(synth, "_MAX_WORKERS", 4)
    monkeypatch.setattr(synth.os, "cpu_count", lambda: 4)
    # an empty cache: an earlier test writing the same checkpoint leaves its weights' results in the module's one
    monkeypatch.setattr(random_quantized, "_CACHE", random_quantized._OnceCache(size=48, threads=4))
    names = []
    quantize = {"fp8": "quantize_fp8_block", "nvfp4": "quantize_nvfp4"}[weights]
    original = getattr(random_quantized, quantize)

    def counting(w, *args, **kwargs):
        names.append(tuple(w.shape))
        return original(w, *args, **kwargs)

    monkeypatch.setattr(random_quantized, quantize, counting)
    out = tmp_path / weights
    write_checkpoint(out, preset="qwen3-moe-tiny", experts_dtype=weights, progress=False)
    weight_map = json.loads((out / "model.safetensors.index.json").read_text())["weight_map"]
    one_per_weight = {"fp8": ".weight_scale_inv", "nvfp4": ".weight_scale_2"}[weights]
    quantized = sum(1 for name in weight_map if name.endswith(one_per_weight))
    assert quantized >= 3 * 4 and len(names) == quantized


def test_shards_read_back_exactly_as_planned(tmp_path):
    from safetensors import safe_open

    d = _small(tmp_path, layers=3, shard_bytes=100_000)
    cfg = json.loads((d / "config.json").read_text())
    specs = tensor_specs(cfg)
    plan = plan_shards(specs, 100_000)
    assert len(plan) > 2
    index = json.loads((d / "model.safetensors.index.json").read_text())
    assert index["metadata"]["total_size"] == sum(tensor_nbytes(s.shape, s.dtype) for s in specs)
    assert index["weight_map"] == {t.name: s.file_name for s in plan for t in s.tensors}
    assert sorted(p.name for p in d.glob("*.safetensors")) == [s.file_name for s in plan]
    seen = {}
    for shard in plan:
        path = d / shard.file_name
        raw = path.read_bytes()
        (n,) = struct.unpack("<Q", raw[:8])
        assert n % 8 == 0 and raw[8:8 + n] == shard.header()[8:] and len(raw) == 8 + n + shard.data_bytes
        assert json.loads(raw[8:8 + n])["__metadata__"] == {"format": "pt"}
        with safe_open(path, "pt") as f:
            assert f.metadata() == {"format": "pt"}
            for name in f.keys():
                sl = f.get_slice(name)
                seen[name] = (tuple(sl.get_shape()), sl.get_dtype())
    assert seen == {s.name: (s.shape, s.dtype) for s in specs}
    assert cfg["quickmoe_synthetic"] == {"preset": "tiny", "seed": 0, "experts_dtype": "mxfp4"}
    gen = json.loads((d / "generation_config.json").read_text())
    assert gen == {"do_sample": True, "eos_token_id": [510], "pad_token_id": 511}


def test_published_generation_config(tmp_path):
    d = _small(tmp_path, overrides=dict(vocab_size=201088))
    assert json.loads((d / "generation_config.json").read_text()) == {
        "bos_token_id": 199998, "do_sample": True, "eos_token_id": [200002, 199999, 200012], "pad_token_id": 199999}


def test_weight_statistics(tmp_path):
    d = _small(tmp_path, overrides=dict(hidden_size=256, intermediate_size=128))
    t = _read_all(d)
    p = "model.layers.1"
    q = t[f"{p}.self_attn.q_proj.weight"].float()
    assert abs(q.std().item() * 256**0.5 - 1) < 0.05 and abs(q.mean().item()) < 0.01
    norm = t[f"{p}.input_layernorm.weight"].float()
    assert abs(norm.mean().item() - 1) < 0.02 and 0.02 < norm.std().item() < 0.1
    sinks = torch.cat([t[f"model.layers.{i}.self_attn.sinks"].float() for i in range(2)])
    assert sinks.abs().max() < 5 and sinks.std() > 0.3
    for kind, k in (("gate_up_proj", 256), ("down_proj", 128)):
        w = dequantize_mxfp4(t[f"{p}.mlp.experts.{kind}_blocks"], t[f"{p}.mlp.experts.{kind}_scales"])
        assert 0.7 < w.std().item() * k**0.5 < 1.4  # effective std ~ 1/sqrt(in_features)
        assert len(t[f"{p}.mlp.experts.{kind}_scales"].unique()) == 2  # a little per-block variation
    assert abs(t["lm_head.weight"].float().std().item() * 256**0.5 - 1) < 0.05


def test_bf16_experts_are_the_dequantized_mxfp4_experts(tmp_path):
    q, b = _read_all(_small(tmp_path, "q")), _read_all(_small(tmp_path, "b", experts_dtype="bf16"))
    for name, tensor in b.items():
        if name.endswith((".gate_up_proj", ".down_proj")):
            want = dequantize_mxfp4(q[f"{name}_blocks"], q[f"{name}_scales"], torch.bfloat16).transpose(1, 2)
            assert torch.equal(tensor, want), name  # [E, K, N] in x out
        else:
            assert torch.equal(tensor, q[name]), name
    assert len(q) - len(b) == 2 * 2  # two layers, (blocks, scales) x 2 -> one bf16 tensor x 2


def test_refuses_to_overwrite_unless_asked(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _small(tmp_path, "out")  # an empty directory is fine
    with pytest.raises(ConfigError, match="not empty"):
        _small(tmp_path, "out")
    first = _digests(out)
    _small(tmp_path, "out", seed=3, overwrite=True)
    assert _digests(out) != first
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="does not look like a checkpoint"):
        _small(tmp_path, "notes", overwrite=True)
    assert (other / "todo.txt").read_text() == "keep me"
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a directory"):
        _small(tmp_path, "file", overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "notes", "out"]


def test_interrupted_write_leaves_nothing(tmp_path, monkeypatch):
    real_write_shard = synth.write_shard
    written: list[str] = []

    def write_then_interrupt(path, shard, chunks, on_bytes=None):
        if written:  # the second shard: interrupted in the middle of the data
            raise KeyboardInterrupt
        real_write_shard(path, shard, chunks, on_bytes)
        written.append(shard.file_name)

    monkeypatch.setattr(synth, "write_shard", write_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        _small(tmp_path, "never", shard_bytes=100_000)
    assert written and list(tmp_path.iterdir()) == []


def test_missing_tokenizer_module_only_warns(tmp_path, monkeypatch, caplog):
    monkeypatch.undo()  # the real _write_tokenizer, with its import made to fail
    monkeypatch.setitem(sys.modules, "quickmoe.tokenizer", None)
    with caplog.at_level(logging.WARNING, logger="quickmoe.checkpoint.synth"):
        d = _small(tmp_path)
    assert any("tokenizer" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert (d / "model.safetensors.index.json").is_file()


# --- transformers loads and runs what we write --------------------------------------------------------

def _load_hf(d: Path, experts_dtype: str):
    transformers = pytest.importorskip("transformers")
    kwargs = {"quantization_config": transformers.Mxfp4Config(dequantize=True)} if experts_dtype == "mxfp4" else {}
    model = transformers.GptOssForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager",
                                                           **kwargs)
    return model.eval()


@pytest.mark.parametrize("experts_dtype", ["mxfp4", "bf16"])
def test_transformers_loads_and_runs_it(tmp_path, experts_dtype):
    d = _small(tmp_path, experts_dtype=experts_dtype, layers=3)
    model = _load_hf(d, experts_dtype)
    experts = model.model.layers[0].mlp.experts
    assert experts.gate_up_proj.shape == (8, 64, 128) and experts.gate_up_proj.dtype == torch.float32
    routed: list[torch.Tensor] = []
    for layer in model.model.layers:
        layer.mlp.router.register_forward_hook(lambda mod, args, out: routed.append(out[2]))
    ids = torch.randint(0, 512, (2, 48), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (2, 48, 512) and bool(logits.isfinite().all())
    assert 0.2 < logits.std().item() < 20
    assert logits.argmax(-1).unique().numel() > 10  # the prediction depends on the input
    assert len(routed) == 3
    for idx in routed:  # [tokens, top-k]: every layer spreads tokens over most experts
        counts = torch.bincount(idx.flatten(), minlength=8)
        assert (counts > 0).sum() >= 6 and counts.max() < 0.5 * idx.numel()


def test_transformers_dequantizes_our_experts_like_we_do(tmp_path):
    d = _small(tmp_path)
    model = _load_hf(d, "mxfp4")
    ours = _read_all(d)
    for i, layer in enumerate(model.model.layers):
        x = f"model.layers.{i}.mlp.experts"
        for kind in ("gate_up_proj", "down_proj"):
            want = dequantize_mxfp4(ours[f"{x}.{kind}_blocks"], ours[f"{x}.{kind}_scales"]).transpose(1, 2)
            assert torch.equal(getattr(layer.mlp.experts, kind).detach(), want), f"{x}.{kind}"
            assert torch.equal(getattr(layer.mlp.experts, f"{kind}_bias").detach(), ours[f"{x}.{kind}_bias"].float())
        assert torch.equal(layer.self_attn.sinks.detach(), ours[f"model.layers.{i}.self_attn.sinks"].float())


def test_both_expert_formats_give_the_same_logits(tmp_path):
    ids = torch.randint(0, 512, (1, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a = _load_hf(_small(tmp_path, "q"), "mxfp4")(ids).logits
        b = _load_hf(_small(tmp_path, "b", experts_dtype="bf16"), "bf16")(ids).logits
    assert torch.allclose(a, b, atol=1e-5)


def test_quantized_weights_are_quantized_on_several_threads_at_once(tmp_path, monkeypatch):
    """A weight's parts are consecutive jobs sharing one quantization: the generator's look-ahead must reach
    past them, or one weight at a time is quantized whatever the thread count (390 s for Qwen3-30B-A3B NVFP4)."""
    import threading

    from quickmoe.checkpoint import random_quantized

    monkeypatch.setattr(synth, "_MAX_WORKERS", 4)
    monkeypatch.setattr(synth.os, "cpu_count", lambda: 4)
    lock, running, most = threading.Lock(), [0], [0]
    original = random_quantized.quantize_nvfp4

    def slow(w):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02)  # long enough for the other threads to start theirs
        try:
            return original(w)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(random_quantized, "quantize_nvfp4", slow)
    monkeypatch.setattr(random_quantized, "_CACHE", random_quantized._OnceCache(size=48, threads=4))
    threads = torch.get_num_threads()
    write_checkpoint(tmp_path / "q", preset="qwen3-moe-tiny", experts_dtype="nvfp4", progress=False)
    assert most[0] >= 3, f"at most {most[0]} weights were quantized at once on 4 threads"
    assert torch.get_num_threads() == threads  # the generator's single-threaded torch is undone
