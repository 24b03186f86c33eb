"""MXFP4 MoE kernel layout and PermutationCache: the batched, cached, in-place conversion is bit-identical
to a naive per-expert implementation (kept here as the reference), on the CPU and (marked gpu) on the
gpt-oss-20b / -120b layer shapes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from quickmoe.formats.mxfp4_mma_pairs import encode_mma_pairs
from quickmoe.layers.moe import Mxfp4MoEMethod
from quickmoe.layouts import (
    Mxfp4MoELayout,
    PermutationCache,
    convert_experts_,
    default_permutation_cache,
)
from quickmoe.layouts.mxfp4_moe import MAX_SCALE, gate_up_row_order, split_gate_up
from quickmoe.layouts.permutation_cache import ENV_VAR


def naive_convert(blocks, scales, bias, *, gate_up: bool, group: int):
    """The reference: a loop over experts and row groups with plain slicing (no index tensors)."""
    experts, n, groups, _ = blocks.shape
    out_blocks, out_scales, out_bias = [], [], []
    for e in range(experts):
        b, s, bb = blocks[e].reshape(n, groups * 16), scales[e], bias[e]  # [N, K/2], [N, G], [N]
        if gate_up:
            intermediate = n // 2
            gate_b, up_b, gate_s, up_s, gate_bb, up_bb = b[0::2], b[1::2], s[0::2], s[1::2], bb[0::2], bb[1::2]
            parts_b, parts_s, parts_bb = [], [], []
            for start in range(0, intermediate, group):  # group: its gate rows, then its up rows
                cols = slice(start, min(start + group, intermediate))
                parts_b += [gate_b[cols], up_b[cols]]
                parts_s += [gate_s[cols], up_s[cols]]
                parts_bb += [gate_bb[cols], up_bb[cols]]
            b, s, bb = torch.cat(parts_b), torch.cat(parts_s), torch.cat(parts_bb)
        out_blocks.append(encode_mma_pairs(b))  # each word's codes in mma-pair order
        out_scales.append(s.t().contiguous())  # [G, N]
        out_bias.append(bb.clone())
    return torch.stack(out_blocks), torch.stack(out_scales), torch.stack(out_bias)


def random_experts(experts: int, n: int, k: int, *, device="cpu", bias_dtype=torch.float32, seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    blocks = torch.randint(0, 256, (experts, n, k // 32, 16), generator=g, dtype=torch.uint8, device=device)
    scales = torch.randint(0, MAX_SCALE + 1, (experts, n, k // 32), generator=g, dtype=torch.uint8, device=device)
    bias = torch.randn(experts, n, generator=g, device=device).to(bias_dtype)
    return blocks, scales, bias


def convert(tensors, *, gate_up: bool, group: int, cache: PermutationCache):
    blocks, scales, bias = (t.clone() for t in tensors)
    ptrs = [t.data_ptr() for t in (blocks, scales, bias)]
    out = convert_experts_(blocks, scales, bias, gate_up=gate_up, layout=Mxfp4MoELayout(group), cache=cache)
    assert [t.data_ptr() for t in out] == ptrs  # in place: the storages are reused, nothing is duplicated
    return out


def assert_identical(got, want):
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert torch.equal(g.view(torch.uint8) if g.is_floating_point() else g,
                           w.view(torch.uint8) if w.is_floating_point() else w)  # bit-identical


# (experts, I, H, group): ragged groups (I % group != 0), g = 1 (checkpoint order), g > I, 20b-like dims
SHAPES = [(3, 5, 32, 2), (4, 96, 64, 64), (2, 64, 96, 64), (3, 48, 64, 1), (2, 40, 32, 128), (2, 2880, 2880, 64)]


@pytest.mark.parametrize("experts, inter, hidden, group", SHAPES)
@pytest.mark.parametrize("bias_dtype", [torch.float32, torch.bfloat16])
def test_batched_conversion_equals_naive(experts, inter, hidden, group, bias_dtype):
    gate_up = random_experts(experts, 2 * inter, hidden, bias_dtype=bias_dtype, seed=1)
    down = random_experts(experts, hidden, inter if inter % 32 == 0 else 32, bias_dtype=bias_dtype, seed=2)
    cache = PermutationCache(enabled=True)
    got = convert(gate_up, gate_up=True, group=group, cache=cache)
    assert got[0].shape == (experts, 2 * inter, hidden // 2) and got[1].shape == (experts, hidden // 32, 2 * inter)
    assert_identical(got, naive_convert(*gate_up, gate_up=True, group=group))
    assert_identical(convert(down, gate_up=False, group=group, cache=cache),
                     naive_convert(*down, gate_up=False, group=group))


def test_hits_and_misses_count_keys_not_layers_or_experts():
    cache, layers, experts = PermutationCache(enabled=True), 5, 4
    for layer in range(layers):
        convert(random_experts(experts, 2 * 96, 64, seed=layer), gate_up=True, group=64, cache=cache)
        convert(random_experts(experts, 64, 96, seed=layer), gate_up=False, group=64, cache=cache)
    # keys: gate_up rows of blocks, gate_up rows of bias, gate_up scales, down scales
    stats = cache.stats()
    assert (stats.misses, stats.hits, stats.entries) == (4, 4 * (layers - 1), 4)
    assert stats.gathers == 4 * layers  # one batched gather per tensor (everything fits the budget)
    assert stats.index_bytes == 8 * (192 + 192 + 192 * 2 + 64 * 3)
    convert(random_experts(experts, 2 * 96, 64), gate_up=True, group=32, cache=cache)  # another layout parameter
    assert cache.stats().misses == 7  # blocks, bias and scales of gate_up again; down scales do not depend on g
    cache.clear()
    assert cache.stats().entries == 0 and cache.stats().misses == 7
    cache.clear(reset_stats=True)
    assert (cache.stats().hits, cache.stats().misses) == (0, 0)


@pytest.mark.parametrize("budget", [1, 3 * 96 * 32, 10**9])  # one expert per chunk, 3 of 5 (ragged), all
def test_chunking_under_a_budget_gives_the_same_result(budget):
    experts, inter, hidden = 5, 48, 64
    tensors = random_experts(experts, 2 * inter, hidden, seed=3)
    cache = PermutationCache(enabled=True, budget_bytes=budget)
    got = convert(tensors, gate_up=True, group=16, cache=cache)
    assert_identical(got, naive_convert(*tensors, gate_up=True, group=16))
    blocks_per_expert = 2 * inter * hidden // 2
    chunk = max(1, budget // blocks_per_expert)
    assert cache.stats().gathers >= -(-experts // chunk)  # the blocks alone take ceil(E / chunk) gathers
    if budget == 1:
        assert cache.stats().gathers == 3 * experts


def test_disabled_cache_rebuilds_per_expert_and_gives_the_same_result():
    experts = 3
    tensors = random_experts(experts, 2 * 40, 64, seed=4)
    off = PermutationCache(enabled=False)
    got = convert(tensors, gate_up=True, group=16, cache=off)
    assert_identical(got, convert(tensors, gate_up=True, group=16, cache=PermutationCache(enabled=True)))
    stats = off.stats()
    assert not stats.enabled and stats.entries == 0 and stats.hits == 0
    assert stats.misses == stats.gathers == 3 * experts  # blocks, bias, scales: one index build per expert


def test_env_var_disables_the_cache(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "0")
    assert not PermutationCache().enabled
    monkeypatch.setenv(ENV_VAR, "1")
    assert PermutationCache().enabled
    assert PermutationCache(enabled=False).enabled is False
    assert default_permutation_cache() is default_permutation_cache()
    assert default_permutation_cache().stats().entries >= 0


def test_row_order_is_a_permutation_and_split_inverts_it():
    for inter, group in [(5, 2), (96, 64), (64, 64), (7, 1), (3, 8)]:
        order = gate_up_row_order(inter, group)
        assert sorted(order.tolist()) == list(range(2 * inter))
        h = torch.randn(3, 2 * inter)  # checkpoint order: even gate, odd up
        gate, up = split_gate_up(h[:, order], group)
        assert torch.equal(gate, h[:, 0::2]) and torch.equal(up, h[:, 1::2])
    assert torch.equal(gate_up_row_order(6, 1), torch.arange(12))


class _Layer(nn.Module):
    def __init__(self, experts: int, hidden: int, inter: int) -> None:
        super().__init__()
        self.num_experts, self.hidden_size, self.intermediate_size = experts, hidden, inter
        self.swiglu_limit, self.swiglu_alpha = 7.0, 1.702


def test_quant_method_converts_its_parameters_in_place():
    experts, hidden, inter = 3, 64, 96
    layer, cache = _Layer(experts, hidden, inter), PermutationCache(enabled=True)
    method = Mxfp4MoEMethod(Mxfp4MoELayout(64), cache)
    method.create_weights(layer, dtype=torch.float32, device="cpu")
    gate_up, down = random_experts(experts, 2 * inter, hidden, seed=5), random_experts(experts, hidden, inter, seed=6)
    for proj, tensors in (("gate_up_proj", gate_up), ("down_proj", down)):
        for suffix, t in zip(("blocks", "scales", "bias"), tensors):
            param = getattr(layer, f"{proj}_{suffix}")
            param.weight_loader(param, t)
    x = torch.randn(2, hidden)
    with pytest.raises(RuntimeError, match="before process_weights_after_loading"):
        method.apply(layer, x, torch.ones(2, 1), torch.zeros(2, 1, dtype=torch.long))
    ptrs = {n: p.data_ptr() for n, p in layer.named_parameters()}
    method.process_weights_after_loading(layer)
    assert {n: p.data_ptr() for n, p in layer.named_parameters()} == ptrs
    assert_identical((layer.gate_up_proj_blocks, layer.gate_up_proj_scales, layer.gate_up_proj_bias),
                     naive_convert(*gate_up, gate_up=True, group=64))
    assert_identical((layer.down_proj_blocks, layer.down_proj_scales, layer.down_proj_bias),
                     naive_convert(*down, gate_up=False, group=64))
    with pytest.raises(RuntimeError, match="already"):
        method.process_weights_after_loading(layer)


@pytest.mark.gpu
@pytest.mark.parametrize("experts", [32, 128], ids=["gpt-oss-20b", "gpt-oss-120b"])
def test_gpu_layer_conversion_equals_naive_within_memory_budget(experts):
    from quickmoe.kernels.mxfp4_mma_pairs import encode_mma_pairs_

    inter = hidden = 2880
    budget = 256 << 20
    cache = PermutationCache(enabled=True, budget_bytes=budget)
    for gate_up, (n, k) in ((True, (2 * inter, hidden)), (False, (hidden, inter))):
        tensors = random_experts(experts, n, k, device="cuda", bias_dtype=torch.bfloat16, seed=7)
        want = naive_convert(*tensors, gate_up=gate_up, group=64)
        work = [t.clone() for t in tensors]
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        got = convert_experts_(*work, gate_up=gate_up, layout=Mxfp4MoELayout(64), cache=cache,
                               encode_=encode_mma_pairs_)  # the Triton pass, as the layer passes it
        torch.cuda.synchronize()
        index_bytes = cache.stats().index_bytes
        assert torch.cuda.max_memory_allocated() - before <= budget + index_bytes + (8 << 20)
        assert_identical(got, want)
    assert cache.stats().misses == 4


def test_a_scale_beyond_the_kernels_range_is_a_clear_error():
    blocks, scales, bias = random_experts(2, 64, 64, seed=8)
    scales[1, 3, 0] = MAX_SCALE + 1 + torch.randint(0, 255 - MAX_SCALE, ()).item()
    with pytest.raises(ValueError, match=rf"down experts: a scale byte of {int(scales[1, 3, 0])} \(2\^"):
        convert_experts_(blocks, scales, bias, gate_up=False, layout=Mxfp4MoELayout(64),
                         cache=PermutationCache(enabled=True))
