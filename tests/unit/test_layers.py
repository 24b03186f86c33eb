"""Layer building blocks against independent references (transformers' maths, naive float64 loops)."""

from __future__ import annotations

import math

import pytest
import torch

from quickmoe.config import RopeScaling
from quickmoe.kernels.fused_moe import fused_moe_ref
from quickmoe.kernels.rotary_kv_write import apply_rotary_ref
from quickmoe.kernels.routing import topk_softmax_ref
from quickmoe.layers.attention import sink_attention_ref
from quickmoe.layers.rotary import RotaryEmbedding, rope_inv_freq


@pytest.mark.parametrize("truncate", [False, True])
def test_yarn_inv_freq_matches_transformers(truncate):
    from transformers import GptOssConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = dict(rope_type="yarn", factor=32.0, beta_fast=32.0, beta_slow=1.0,
                  original_max_position_embeddings=4096, truncate=truncate, rope_theta=150000.0)
    hf_cfg = GptOssConfig(rope_parameters=dict(params), head_dim=64, num_hidden_layers=2)
    want, want_scale = ROPE_INIT_FUNCTIONS["yarn"](hf_cfg)
    rope = RopeScaling(**params)
    got = rope_inv_freq(rope, 64)
    assert torch.allclose(got, want, rtol=1e-6, atol=0)
    assert rope.cos_sin_scale == pytest.approx(want_scale, rel=1e-12)


def test_rotary_rotates_halves_by_position_angles():
    rope = RopeScaling(rope_theta=10000.0, rope_type="default")
    rot = RotaryEmbedding(rope, 8, 128, device="cpu")
    x = torch.randn(5, 3, 8, dtype=torch.float64)
    pos = torch.tensor([0, 1, 2, 10, 100])
    cos, sin = rot.cos_sin(pos, torch.float64)
    got = apply_rotary_ref(x, cos, sin)
    inv = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    for t in range(5):  # pair i is (x[i], x[i + D/2]) rotated by angle pos * inv_freq[i]
        for i in range(4):
            a = pos[t].item() * inv[i].item()
            x1, x2 = x[t, :, i], x[t, :, i + 4]
            assert torch.allclose(got[t, :, i], x1 * math.cos(a) - x2 * math.sin(a), atol=1e-5)
            assert torch.allclose(got[t, :, i + 4], x2 * math.cos(a) + x1 * math.sin(a), atol=1e-5)
    assert torch.allclose(got[0], x[0])  # position 0 is the identity


def _naive_sink_attention(q, k, v, sinks, q_pos, window, scale):
    n, h, d = q.shape
    groups = h // k.shape[1]
    out = torch.zeros(n, h, d, dtype=torch.float64)
    for i in range(n):
        for head in range(h):
            p = q_pos[i].item()
            keys = [j for j in range(k.shape[0]) if j <= p and (window is None or j > p - window)]
            s = torch.tensor([(q[i, head].double() @ k[j, head // groups].double()).item() * scale for j in keys])
            m = max(s.max().item(), sinks[head].item())
            e = torch.exp(s - m)
            denom = e.sum() + math.exp(sinks[head].item() - m)
            for w, j in zip(e / denom, keys):
                out[i, head] += w * v[j, head // groups].double()
    return out


@pytest.mark.parametrize("window", [None, 3, 100])
def test_sink_attention_matches_naive_loop(window):
    g = torch.Generator().manual_seed(1)
    L, n, h, kv, d = 9, 4, 4, 2, 8
    q, k, v = (torch.randn(s, generator=g) for s in ((n, h, d), (L, kv, d), (L, kv, d)))
    sinks = torch.randn(h, generator=g)
    q_pos = torch.tensor([5, 6, 7, 8])  # the last 4 tokens of a 9-token sequence
    got = sink_attention_ref(q, k, v, sinks, q_pos, window, d**-0.5)
    want = _naive_sink_attention(q, k, v, sinks, q_pos, window, d**-0.5)
    assert torch.allclose(got.double(), want, atol=1e-5)


def _naive_moe(x, weights, ids, w1, b1, w2, b2, limit=7.0, alpha=1.702):
    out = torch.zeros(x.shape, dtype=torch.float64)
    for t in range(x.shape[0]):
        for slot in range(ids.shape[1]):
            e = ids[t, slot].item()
            h = w1[e].double() @ x[t].double() + b1[e].double()
            gate, up = h[0::2].clamp(max=limit), h[1::2].clamp(-limit, limit)
            a = (up + 1) * gate * torch.sigmoid(alpha * gate)
            out[t] += weights[t, slot].double() * (w2[e].double() @ a + b2[e].double())
    return out


@pytest.mark.parametrize("num_tokens, top_k", [(1, 1), (6, 2), (9, 4)])
def test_fused_moe_ref_matches_naive_loop_bf16_and_mxfp4(num_tokens, top_k):
    from quickmoe.formats.mxfp4 import dequantize_mxfp4
    from quickmoe.layouts import Mxfp4MoELayout, PermutationCache, convert_experts_

    g = torch.Generator().manual_seed(num_tokens)
    E, H, I = 6, 64, 32
    x = torch.randn(num_tokens, H, generator=g)
    logits = torch.randn(num_tokens, E, generator=g)
    logits[:, 5] = -100  # expert 5 gets no token
    weights, ids = topk_softmax_ref(logits, top_k)
    b1, b2 = torch.randn(E, 2 * I, generator=g), torch.randn(E, H, generator=g)
    # bf16-style dense experts (out x in)
    w1, w2 = torch.randn(E, 2 * I, H, generator=g) * 0.2, torch.randn(E, H, I, generator=g) * 0.2
    got = fused_moe_ref(x, weights, ids, w1, b1, w2, b2)
    assert torch.allclose(got.double(), _naive_moe(x, weights, ids, w1, b1, w2, b2), atol=1e-4)
    # MXFP4 experts: random blocks and scales, compared with the naive loop on their dequantized values
    q1 = torch.randint(0, 256, (E, 2 * I, H // 32, 16), generator=g, dtype=torch.uint8)
    s1 = torch.randint(122, 127, (E, 2 * I, H // 32), generator=g, dtype=torch.uint8)
    q2 = torch.randint(0, 256, (E, H, I // 32, 16), generator=g, dtype=torch.uint8)
    s2 = torch.randint(122, 127, (E, H, I // 32), generator=g, dtype=torch.uint8)
    want = _naive_moe(x, weights, ids, dequantize_mxfp4(q1, s1), b1, dequantize_mxfp4(q2, s2), b2)
    for group in (1, 5, 64):  # the kernel layout, gate/up groups dividing I or not
        layout, cache = Mxfp4MoELayout(gate_up_group=group), PermutationCache(enabled=True)
        k1, ks1, kb1 = convert_experts_(q1.clone(), s1.clone(), b1.clone(), gate_up=True, layout=layout, cache=cache)
        k2, ks2, kb2 = convert_experts_(q2.clone(), s2.clone(), b2.clone(), gate_up=False, layout=layout, cache=cache)
        got = fused_moe_ref(x, weights, ids, k1, kb1, k2, kb2, w1_scales=ks1, w2_scales=ks2, gate_up_group=group)
        assert torch.allclose(got.double(), want, atol=1e-4)


def test_topk_softmax_is_softmax_over_selected_logits():
    logits = torch.tensor([[0.1, 3.0, -1.0, 2.0]])
    w, ids = topk_softmax_ref(logits, 2)
    assert ids.tolist() == [[1, 3]]
    e = torch.exp(torch.tensor([3.0, 2.0]))
    assert torch.allclose(w[0], e / e.sum())
