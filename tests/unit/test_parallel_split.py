"""How the ranks split a model, without starting any: shares of a dimension, KV heads replicated when fewer than
ranks, the errors naming the field that does not split, and each rank's load reading its own slices only."""

from __future__ import annotations

import pytest
import torch

from quickmoe.config import EngineConfig
from quickmoe.distributed import ParallelContext, even_shard, split_sizes
from quickmoe.errors import ConfigError


def test_split_sizes_in_units():
    assert split_sizes(1030, 4) == [258, 258, 257, 257]
    assert split_sizes(2880, 4, unit=32) == [736, 736, 704, 704]  # gpt-oss-120b's intermediate in MXFP4 blocks
    assert even_shard(2880, 3, 4, field="f", unit=32).start == 2176
    with pytest.raises(ConfigError, match=r"moe_intermediate_size = 64 holds 2 block\(s\) of 32"):
        split_sizes(64, 4, unit=32, field="moe_intermediate_size")
    with pytest.raises(ConfigError, match=r"num_attention_heads = 6: expected a multiple of 4"):
        even_shard(6, 0, 4, field="num_attention_heads", exact=True)


def test_kv_heads_split_or_replicate():
    heads = [ParallelContext(rank=r, world_size=4).kv_head_shard(8, 2) for r in range(4)]
    assert [(s.start, s.size) for s in heads] == [(0, 1), (0, 1), (1, 1), (1, 1)]  # ranks 0,1 read KV head 0
    heads = [ParallelContext(rank=r, world_size=2).kv_head_shard(8, 4) for r in range(2)]
    assert [(s.start, s.size) for s in heads] == [(0, 2), (2, 2)]
    with pytest.raises(ConfigError, match="num_key_value_heads = 3"):
        ParallelContext(rank=0, world_size=2).kv_head_shard(6, 3)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tests.models.conftest import write_small_checkpoint

    return write_small_checkpoint(tmp_path_factory.mktemp("tp") / "m", layers=1, experts=4, hidden_size=64,
                                  intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=16)


@pytest.mark.parametrize("tp, ep, needle", [
    (3, False, "num_attention_heads = 4: expected a multiple of 3"),
    (8, False, "num_attention_heads = 4"),
])
def test_a_size_the_ranks_cannot_split_fails_before_any_rank_starts(tiny, tp, ep, needle):
    from quickmoe.executor.launch import check_split

    with pytest.raises(ConfigError, match=needle):
        check_split(str(tiny), EngineConfig(tensor_parallel_size=tp, enable_expert_parallel=ep))


def test_experts_and_mxfp4_blocks_name_their_field(tiny):
    from quickmoe.config import ModelConfig
    from quickmoe.layers.moe import FusedMoE, Mxfp4MoEMethod

    config = ModelConfig.from_dir(tiny)
    with pytest.raises(ConfigError, match=r"moe_intermediate_size = 128 holds 4 block\(s\) of 32: fewer than the 8"):
        FusedMoE(config, Mxfp4MoEMethod(), activation="swiglu_gpt_oss", dtype=torch.float32, device="meta",
                 parallel=ParallelContext(rank=0, world_size=8))
    with pytest.raises(ConfigError, match=r"number of experts .* = 4: expected a multiple of 3"):
        FusedMoE(config, Mxfp4MoEMethod(), activation="swiglu_gpt_oss", dtype=torch.float32, device="meta",
                 parallel=ParallelContext(rank=0, world_size=3, expert_parallel=True))


@pytest.mark.parametrize("runs", [False, True])
def test_a_rank_loads_its_slices_and_reads_less(tiny, runs, monkeypatch):
    """Rank 1 of 2 (no process group needed to build and load): its parameters are its slices of the checkpoint
    tensors (rows, columns, sinks, experts' channels), the row-parallel biases are zero, and it reads fewer bytes;
    `runs`: the experts' gate_up rows are read one run per expert (the tiny tensors' runs are below the default
    MIN_RUN_BYTES, so it is lowered), fewer bytes again."""
    from quickmoe.checkpoint import narrow
    from quickmoe.checkpoint.loader import load_weights
    from quickmoe.checkpoint.reader import CheckpointReader
    from quickmoe.config import ModelConfig
    from quickmoe.models.registry import build_model

    config, reader = ModelConfig.from_dir(tiny), CheckpointReader(tiny)
    whole = build_model(config, dtype=torch.float32, device="cpu")
    full_stats = load_weights(whole, reader)
    part = build_model(config, dtype=torch.float32, device="cpu", parallel=ParallelContext(rank=1, world_size=2))
    whole_read = load_weights(part, reader).num_bytes
    if runs:
        monkeypatch.setattr(narrow, "MIN_RUN_BYTES", 1)
    stats = load_weights(part, reader)
    assert stats.num_bytes < full_stats.num_bytes
    gate_up = reader.entries["model.layers.0.mlp.experts.gate_up_proj_blocks"].nbytes
    if runs:  # at least half of every expert's gate_up rows are not read (and the other sliced tensors' runs)
        assert whole_read - stats.num_bytes >= gate_up // 2
    else:
        assert whole_read == stats.num_bytes
    w, p = dict(whole.named_parameters()), dict(part.named_parameters())
    vocab = config.vocab_size
    torch.testing.assert_close(p["model.embed_tokens.weight"], w["model.embed_tokens.weight"][vocab // 2:])
    attn = "model.layers.0.self_attn."
    torch.testing.assert_close(p[attn + "q_proj.weight"], w[attn + "q_proj.weight"][32:])  # heads 2, 3 of 16 dims
    torch.testing.assert_close(p[attn + "k_proj.weight"], w[attn + "k_proj.weight"][16:])  # KV head 1
    torch.testing.assert_close(p[attn + "o_proj.weight"], w[attn + "o_proj.weight"][:, 32:])
    torch.testing.assert_close(p[attn + "sinks"], w[attn + "sinks"][2:])
    assert not p[attn + "o_proj.bias"].any() and w[attn + "o_proj.bias"].any()  # added once, by rank 0
    exp = "model.layers.0.mlp.experts."
    torch.testing.assert_close(p[exp + "gate_up_proj_blocks"], w[exp + "gate_up_proj_blocks"][:, 128:])
    torch.testing.assert_close(p[exp + "down_proj_scales"], w[exp + "down_proj_scales"][:, :, 2:])
    assert not p[exp + "down_proj_bias"].any()
    ep = build_model(config, dtype=torch.float32, device="cpu",
                     parallel=ParallelContext(rank=1, world_size=2, expert_parallel=True))
    load_weights(ep, reader)
    e = dict(ep.named_parameters())
    torch.testing.assert_close(e[exp + "down_proj_blocks"], w[exp + "down_proj_blocks"][2:])
    torch.testing.assert_close(e[exp + "down_proj_bias"], w[exp + "down_proj_bias"][2:])


def test_more_ranks_than_gpus_is_refused(monkeypatch):
    from quickmoe.executor import launch

    monkeypatch.setattr(launch, "resolve_device", lambda name: torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(ConfigError, match=r"tensor_parallel_size = 4: only 2 GPU\(s\) visible"):
        launch._check_devices(EngineConfig(tensor_parallel_size=4), 4)


def test_the_split_check_builds_on_meta_without_torch_dynamo(tiny):
    """The ranks' dry run (and `quickmoe info`) build the model on the meta device, where torch.arange has no kernel
    and its Python reference imports torch._dynamo (0.7 s on the development machine): the rotary table is then
    only declared. In a fresh interpreter the check leaves torch._dynamo unimported, and the meta model's table has
    its shape."""
    import subprocess
    import sys

    code = ("import sys, torch\n"
            "from quickmoe.config import EngineConfig\n"
            "from quickmoe.executor.launch import check_split\n"
            "from quickmoe.config import ModelConfig\n"
            "from quickmoe.models.registry import build_model\n"
            f"check_split({str(tiny)!r}, EngineConfig(tensor_parallel_size=2))\n"
            f"model = build_model(ModelConfig.from_dir({str(tiny)!r}), dtype=torch.bfloat16, device='meta')\n"
            "tables = [b for n, b in model.named_buffers() if n.endswith('cos_sin_cache')]\n"
            "assert tables and all(t.is_meta and t.shape[-1] == 16 for t in tables), tables\n"
            "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"
