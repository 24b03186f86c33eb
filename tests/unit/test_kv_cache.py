"""The paged KV cache plan: layers grouped by window, a sliding group sized by what its sequences can hold,
the rest of the budget to full attention, a clear error when one max_model_len sequence does not fit; the
cache tensors follow the plan."""

from __future__ import annotations

import math

import pytest
import torch

from quickmoe.config import ModelConfig
from quickmoe.engine.block_manager import KVBlockManager
from quickmoe.errors import ConfigError
from quickmoe.executor.kv_cache import PagedKVCache, activation_bytes_estimate, plan_kv_cache, sliding_blocks_needed


def _config(layers=6, window=128, **extra) -> ModelConfig:
    return ModelConfig.from_dict({
        "architectures": ["GptOssForCausalLM"], "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 64,
        "num_hidden_layers": layers, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": window, **extra}, source="test")


def test_groups_by_window_and_budget_split():
    config = _config()
    plan = plan_kv_cache(config, dtype=torch.bfloat16, block_size=16, memory_bytes=64 << 20, max_num_seqs=8,
                         max_num_batched_tokens=256, max_model_len=1024)
    per_block_layer = 2 * 16 * 2 * 16 * 2  # K and V, block 16, 2 KV heads, head_dim 16, bf16
    assert plan.bytes_per_block_per_layer == per_block_layer
    full, sliding = plan.groups
    assert (full.name, full.window, full.layers) == ("full", None, (1, 3, 5))
    assert (sliding.name, sliding.window, sliding.layers) == ("sliding128", 128, (0, 2, 4))
    assert sliding.num_blocks == sliding_blocks_needed(128, 16, 8, 256) == 8 * (8 + 2) + 16
    assert full.num_blocks == (64 << 20) // per_block_layer // 3 - sliding.num_blocks
    assert plan.nbytes <= 64 << 20 and plan.max_tokens_per_sequence == full.num_blocks * 16


def test_sliding_bound_covers_the_worst_step():
    """Brute force over one sequence's chunks: the blocks it holds after a step never exceed the bound."""
    for window in (2, 16, 17, 40, 128):
        for block in (16, 32):
            worst = 0
            for start in range(0, 300, 7):
                for n in (1, 5, 16, 33, 100):
                    first = max(0, start - window + 1) // block
                    worst = max(worst, (start + n - 1) // block - first + 1 - math.ceil(n / block))
            assert worst <= sliding_blocks_needed(window, block, 1, 0), (window, block)


def test_too_small_a_budget_names_the_fix():
    with pytest.raises(ConfigError, match="fewer than max_model_len = 4096: lower max_model_len or raise kv_cache"):
        plan_kv_cache(_config(), dtype=torch.float32, block_size=16, memory_bytes=1 << 20, max_num_seqs=4,
                      max_num_batched_tokens=64, max_model_len=4096)


def test_num_kv_blocks_override_and_only_sliding_layers():
    plan = plan_kv_cache(_config(), dtype=torch.float32, block_size=32, memory_bytes=None, max_num_seqs=2,
                         max_num_batched_tokens=64, max_model_len=64, num_blocks=5)
    assert plan.groups[0].num_blocks == 5
    sliding_only = _config(layer_types=["sliding_attention"] * 6)
    plan = plan_kv_cache(sliding_only, dtype=torch.float32, block_size=16, memory_bytes=1 << 20, max_num_seqs=2,
                         max_num_batched_tokens=64, max_model_len=10**6)
    (group,) = plan.groups
    assert group.window == 128 and plan.max_tokens_per_sequence == math.inf
    assert group.num_blocks == (1 << 20) // plan.bytes_per_block_per_layer // 6  # the whole budget


def test_cache_tensors_follow_the_plan():
    config = _config(layers=4, window=16)
    plan = plan_kv_cache(config, dtype=torch.float32, block_size=16, memory_bytes=4 << 20, max_num_seqs=2,
                         max_num_batched_tokens=32, max_model_len=256)
    cache = PagedKVCache(config, plan, dtype=torch.float32, device="cpu")
    for layer in range(4):
        k, v = cache.layer(layer)
        group = plan.groups[cache.layer_group[layer]]
        assert layer in group.layers and k.shape == v.shape == (group.num_blocks, 16, 2, 16)
    assert cache.nbytes == plan.nbytes
    manager = KVBlockManager.for_plan(cache.plan)
    manager.allocate(0, 0, 40)
    assert [len(t) for t in manager.block_tables(0)] == [3, 3]


def test_the_cache_layouts_index_alike_and_differ_in_memory():
    """Head-major (the default) caches are [num_blocks, block, KV, D] views whose KV heads' rows of a block are
    contiguous; slot-major ones are contiguous tensors. The kernels read which off the strides."""
    from quickmoe.kernels.paged_kv_tile import kv_cache_head_major

    config = _config(layers=2, window=16)
    plan = plan_kv_cache(config, dtype=torch.float32, block_size=16, memory_bytes=4 << 20, max_num_seqs=2,
                         max_num_batched_tokens=32, max_model_len=256)
    head = PagedKVCache(config, plan, dtype=torch.float32, device="cpu")
    slot = PagedKVCache(config, plan, dtype=torch.float32, device="cpu", head_major=False)
    for layer in range(2):
        (hk, hv), (sk, sv) = head.layer(layer), slot.layer(layer)
        assert hk.shape == sk.shape and kv_cache_head_major(hk, hv) and not kv_cache_head_major(sk, sv)
        assert sk.is_contiguous() and not hk.is_contiguous() and hk.permute(0, 2, 1, 3).is_contiguous()
        assert hk.stride()[1:] == (16, 16 * 16, 1)  # rows D apart, heads block * D apart
    assert head.nbytes == slot.nbytes == plan.nbytes and "head-major" in head.describe()


def test_activation_estimate_grows_with_the_step():
    config = _config()
    small = activation_bytes_estimate(config, torch.bfloat16, 256, 8)
    assert activation_bytes_estimate(config, torch.bfloat16, 8192, 8) > 10 * small / 2 > 0


def test_a_tight_budget_gives_the_sliding_group_no_more_blocks_than_the_full_group():
    """gpt-oss-120b on one 80 GB GPU: the budget left after the weights was smaller than the sliding group's bound
    at 256 sequences, and the full group got no block ("holds 0 tokens"). A window's blocks are among its
    sequence's positions, so the sliding group needs no more blocks than the full group: both fit the budget, the
    full group as large as it can be."""
    config = _config(layers=4, window=32)
    per_block_layer = 2 * 4 * 2 * 16 * 4  # K and V, block 4, 2 KV heads, head_dim 16, float32
    need = sliding_blocks_needed(32, 4, 64, 64)  # 64 * 10 + 16 = 656 blocks: more than the budget allows
    budget = 2 * 300 * 2 * per_block_layer + per_block_layer  # 300 blocks for each group's 2 layers, and a bit
    plan = plan_kv_cache(config, dtype=torch.float32, block_size=4, memory_bytes=budget, max_num_seqs=64,
                         max_num_batched_tokens=64, max_model_len=16)
    full, sliding = plan.groups
    assert need > 300 and full.num_blocks == sliding.num_blocks == 300 and plan.nbytes <= budget
    roomy = plan_kv_cache(config, dtype=torch.float32, block_size=4, memory_bytes=2 * need * 2 * per_block_layer,
                          max_num_seqs=64, max_num_batched_tokens=64, max_model_len=16)
    assert [g.num_blocks for g in roomy.groups] == [need, need]  # a budget that holds the bound: as before


def test_with_the_sliding_group_capped_at_the_full_group_only_the_full_group_ever_runs_short():
    """Random sequences growing by random chunks and finishing, through the block manager of a capped plan: an
    allocation that fails always finds the full group short (the sliding group never is when the full is not)."""
    import random

    rng = random.Random()
    config = _config(layers=2, window=rng.choice((8, 12, 32)))
    plan = plan_kv_cache(config, dtype=torch.float32, block_size=4, memory_bytes=2 * 40 * (2 * 4 * 2 * 16 * 4),
                         max_num_seqs=32, max_num_batched_tokens=16, max_model_len=8)
    full, sliding = plan.groups
    assert full.num_blocks == sliding.num_blocks == 40  # capped: the bound at 32 sequences is larger
    manager = KVBlockManager.for_plan(plan)
    lengths: dict[int, int] = {}
    failures = 0
    for step in range(3000):
        if lengths and (rng.random() < 0.1 or len(lengths) >= 32):
            victim = rng.choice(list(lengths))
            manager.free(victim)
            del lengths[victim]
            continue
        seq = rng.choice(list(lengths)) if lengths and rng.random() < 0.8 else step + 1000
        start = lengths.get(seq, 0)
        end = start + rng.randint(1, 6)
        full_free = manager.pools["full"].num_free
        need_full = -(-end // 4) - -(-start // 4)
        if manager.try_allocate(seq, start, end):
            lengths[seq] = end
        else:
            failures += 1
            assert need_full > full_free, "the sliding group ran short while the full group had room"
    assert failures > 0  # the budget was tight enough to matter
