"""FP8 and NVFP4 experts into the kernel layout (layouts/quantized_moe.py): the values survive the re-layout
(checked against the formats' dequantization of the stacked checkpoint tensors), the PermutationCache builds
each index once (misses = distinct keys) and gathers a chunk of experts at a time, and the uncached path gives
the same bytes."""

from __future__ import annotations

import pytest
import torch

from quickmoe.formats.fp8 import dequantize_fp8_block, quantize_fp8_block
from quickmoe.formats.nvfp4 import dequantize_nvfp4, quantize_nvfp4
from quickmoe.layouts.mxfp4_moe import Mxfp4MoELayout, split_gate_up
from quickmoe.layouts.permutation_cache import PermutationCache
from quickmoe.layouts.quantized_moe import (
    convert_fp8_experts,
    convert_nvfp4_experts_,
    dequantize_fp8_expert,
    dequantize_nvfp4_expert,
    fp8_scale_rows,
)

E, H, I = 3, 64, 48  # I = 48: with group 32 the last gate/up group is partial
LAYOUT = Mxfp4MoELayout(gate_up_group=32)


def _weights(seed: int, n: int, k: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, k, generator=g) * torch.exp(torch.randn(n, 1, generator=g))  # [n, k]


def _stacked_fp8(seed: int, block=(16, 16), inter: int = I):
    """Per expert: gate [I, H], up [I, H] and down [H, I] quantized on their own, stacked as at load."""
    w13, s13, w2, s2, ref13, ref2 = [], [], [], [], [], []
    for e in range(E):
        gate, up, down = (quantize_fp8_block(_weights(seed + 10 * e + j, *shape), block)
                          for j, shape in enumerate(((inter, H), (inter, H), (H, inter))))
        w13.append(torch.cat([gate[0], up[0]]))
        s13.append(torch.cat([gate[1], up[1]]))
        w2.append(down[0])
        s2.append(down[1])
        ref13.append((dequantize_fp8_block(*gate, block), dequantize_fp8_block(*up, block)))
        ref2.append(dequantize_fp8_block(*down, block))
    return torch.stack(w13), torch.stack(s13), torch.stack(w2), torch.stack(s2), ref13, ref2


@pytest.mark.parametrize("inter,block,rows13,rows2", [
    (48, (16, 16), 16, 16),  # every aligned 16 kernel rows in one block, the ragged last group too
    (48, (8, 16), 8, 8),  # blocks of 8 rows
    (64, (64, 16), 32, 64),  # blocks taller than the gate/up group (32): one scale per group half
])
def test_fp8_experts_keep_their_values_in_the_kernel_layout(inter, block, rows13, rows2):
    """The values survive the re-layout, with one scale per R kernel rows (R as large as the blocks allow: the
    kernel then takes one scale per tile)."""
    w13, s13, w2, s2, ref13, ref2 = _stacked_fp8(1, block, inter)
    cache = PermutationCache(enabled=True)
    scales13 = convert_fp8_experts(w13, s13, gate_up=True, block=block, layout=LAYOUT, cache=cache)
    scales2 = convert_fp8_experts(w2, s2, gate_up=False, block=block, layout=LAYOUT, cache=cache)
    assert fp8_scale_rows(2 * inter, block[0], LAYOUT, True) == rows13
    assert fp8_scale_rows(H, block[0], LAYOUT, False) == rows2
    assert scales13.shape == (E, H // 16, 2 * inter // rows13) and scales2.shape == (E, inter // 16, H // rows2)
    for e in range(E):
        gate_up = dequantize_fp8_expert(w13[e], scales13[e], torch.float32)  # [2I, H], kernel row order
        gate, up = split_gate_up(gate_up.t(), LAYOUT.gate_up_group)  # [H, I] each
        assert torch.equal(gate.t(), ref13[e][0]) and torch.equal(up.t(), ref13[e][1])
        assert torch.equal(dequantize_fp8_expert(w2[e], scales2[e], torch.float32), ref2[e])


def _stacked_nvfp4(seed: int):
    w13, s13, g13, w2, s2, g2, ref13, ref2 = [], [], [], [], [], [], [], []
    for e in range(E):
        gate, up, down = (quantize_nvfp4(_weights(seed + 10 * e + j, *shape))
                          for j, shape in enumerate(((I, H), (I, H), (H, I))))
        w13.append(torch.cat([gate[0], up[0]]))
        s13.append(torch.cat([gate[1], up[1]]))
        g13.append(torch.stack([gate[2], up[2]]))
        w2.append(down[0])
        s2.append(down[1])
        g2.append(down[2].reshape(1))
        ref13.append((dequantize_nvfp4(*gate), dequantize_nvfp4(*up)))
        ref2.append(dequantize_nvfp4(*down))
    return [torch.stack(t) for t in (w13, s13, g13, w2, s2, g2)], ref13, ref2


def test_nvfp4_experts_keep_their_values_in_the_kernel_layout():
    (w13, s13, g13, w2, s2, g2), ref13, ref2 = _stacked_nvfp4(2)
    assert not torch.equal(g13[:, 0], g13[:, 1])  # gate and up have their own global scales
    ptr = w13.data_ptr(), s13.data_ptr()
    cache = PermutationCache(enabled=True)
    w13k, s13k, row13 = convert_nvfp4_experts_(w13, s13, g13, gate_up=True, layout=LAYOUT, cache=cache)
    w2k, s2k, row2 = convert_nvfp4_experts_(w2, s2, g2, gate_up=False, layout=LAYOUT, cache=cache)
    assert (w13k.data_ptr(), s13k.data_ptr()) == ptr  # in place
    assert s13k.shape == (E, H // 16, 2 * I) and row13.shape == (E, 2 * I) and s2k.shape == (E, I // 16, H)
    for e in range(E):
        gate_up = dequantize_nvfp4_expert(w13k[e], s13k[e], row13[e], torch.float32)  # [2I, H]
        gate, up = split_gate_up(gate_up.t(), LAYOUT.gate_up_group)
        assert torch.equal(gate.t(), ref13[e][0]) and torch.equal(up.t(), ref13[e][1])
        assert torch.equal(dequantize_nvfp4_expert(w2k[e], s2k[e], row2[e], torch.float32), ref2[e])


def test_indices_are_built_once_per_key_and_chunks_bound_the_gathers():
    """Four layers of NVFP4 experts: every transform's index is built once (misses = distinct keys), every
    other use hits; a budget of one expert makes one gather per expert and transform."""
    layers = [_stacked_nvfp4(10 * i)[0] for i in range(4)]
    per_expert = 2 * I * H // 2  # bytes of one expert's gate_up weight: the largest unit moved
    cache = PermutationCache(enabled=True, budget_bytes=per_expert)
    for w13, s13, g13, w2, s2, g2 in layers:
        convert_nvfp4_experts_(w13, s13, g13, gate_up=True, layout=LAYOUT, cache=cache)
        convert_nvfp4_experts_(w2, s2, g2, gate_up=False, layout=LAYOUT, cache=cache)
    stats = cache.stats()
    # gate_up: rows, scales, row scale; down: scales, row scale
    assert stats.misses == stats.entries == 5 and stats.hits == 4 * 5 - 5
    assert stats.gathers >= 4 * E  # the gate_up weight alone needs one gather per expert at this budget


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
def test_uncached_conversion_gives_the_same_bytes(fmt):
    if fmt == "fp8":
        w13, s13, *_ = _stacked_fp8(3)
        outs = []
        for enabled in (True, False):
            w = w13.clone()
            scales = convert_fp8_experts(w, s13, gate_up=True, block=(16, 16), layout=LAYOUT,
                                         cache=PermutationCache(enabled=enabled))
            outs.append((w.view(torch.uint8), scales))
    else:
        (w13, s13, g13, *_), _, _ = _stacked_nvfp4(3)
        outs = []
        for enabled in (True, False):
            w, s = w13.clone(), s13.clone()
            _, sk, row = convert_nvfp4_experts_(w, s, g13, gate_up=True, layout=LAYOUT,
                                                cache=PermutationCache(enabled=enabled))
            outs.append((w, sk.view(torch.uint8), row))
    assert all(torch.equal(a, b) for a, b in zip(*outs))
