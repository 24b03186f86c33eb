"""A plain-torch gpt-oss for training: the same math as the published model (and as quickmoe's and transformers'
inference), written for autograd, with parameters named and shaped as the Hugging Face checkpoint's bf16 layout
(experts in x out, gate/up interleaved), so export is a rename-free quantization.

Per layer: x += o_proj(attention(rms_norm(x))) with GQA, NeoX RoPE (YaRN, cos/sin scaled), a per-head sink
logit in the softmax denominator and, on sliding layers, keys j > i - window; x += MoE(rms_norm(x)) with router
logits -> top-k -> softmax over the k -> SwiGLU experts (gate <= limit, |up| <= limit, (up + 1) * gate *
sigmoid(1.702 gate)) -> down + bias, times the routing weight. `fake_quant` rounds the experts to MXFP4 in the
forward (straight-through gradient): quantization-aware training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from quickmoe.config import ModelConfig
from quickmoe.formats.mxfp4 import dequantize_mxfp4, quantize_mxfp4
from quickmoe.layers.rotary import rope_inv_freq

ALPHA = 1.702


@dataclass(frozen=True)
class Shapes:
    vocab: int
    hidden: int
    inter: int
    layers: int
    experts: int
    top_k: int
    heads: int
    kv_heads: int
    head_dim: int
    window: int
    swiglu_limit: float
    eps: float

    @staticmethod
    def of(c: ModelConfig) -> "Shapes":
        return Shapes(c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_local_experts,
                      c.num_experts_per_tok, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
                      c.sliding_window or 0, c.swiglu_limit, c.rms_norm_eps)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    return (weight.float() * x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def fake_mxfp4(w: torch.Tensor) -> torch.Tensor:
    """w [E, K, N] (in x out) rounded to MXFP4 along K (the checkpoint's blocks run along the in-dimension);
    gradient straight through."""
    t = w.detach().transpose(1, 2)  # [E, N, K]
    blocks, scales = quantize_mxfp4(t)
    q = dequantize_mxfp4(blocks, scales, dtype=torch.float32).transpose(1, 2).to(w.dtype)
    return w + (q - w).detach()


class Attention(nn.Module):
    def __init__(self, s: Shapes, sliding: bool) -> None:
        super().__init__()
        self.s, self.window = s, (s.window if sliding else 0)
        q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(s.hidden, q), nn.Linear(s.hidden, kv), nn.Linear(s.hidden, kv)
        self.o_proj = nn.Linear(q, s.hidden)
        self.sinks = nn.Parameter(torch.zeros(s.heads))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape  # x [B, T, H]
        s = self.s
        q = self.q_proj(x).view(b, t, s.heads, s.head_dim).transpose(1, 2)  # [B, Hq, T, D]
        k = self.k_proj(x).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)  # [B, Hkv, T, D]
        v = self.v_proj(x).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        rep = s.heads // s.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)  # [B, Hq, T, D]
        logits = (q @ k.transpose(-1, -2)) / math.sqrt(s.head_dim)  # [B, Hq, T, T]
        logits = logits.masked_fill(~mask, float("-inf"))
        sink = self.sinks.to(logits.dtype).view(1, -1, 1, 1).expand(b, -1, t, 1)  # [B, Hq, T, 1]
        probs = torch.cat([logits, sink], dim=-1).float().softmax(-1)[..., :-1].to(v.dtype)
        out = (probs @ v).transpose(1, 2).reshape(b, t, -1)  # [B, T, Hq*D]
        return self.o_proj(out)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """NeoX half-split rotation; x [B, h, T, D], cos/sin [T, D/2]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s_ = cos.to(x.dtype), sin.to(x.dtype)
    return torch.cat([x1 * c - x2 * s_, x2 * c + x1 * s_], dim=-1)


class MoE(nn.Module):
    def __init__(self, s: Shapes) -> None:
        super().__init__()
        self.s = s
        self.router = nn.Linear(s.hidden, s.experts)
        self.gate_up_proj = nn.Parameter(torch.randn(s.experts, s.hidden, 2 * s.inter) * s.hidden ** -0.5)
        self.gate_up_proj_bias = nn.Parameter(torch.zeros(s.experts, 2 * s.inter))
        self.down_proj = nn.Parameter(torch.randn(s.experts, s.inter, s.hidden) * s.inter ** -0.5 / 2)
        self.down_proj_bias = nn.Parameter(torch.zeros(s.experts, s.hidden))
        self.fake_quant = False

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [N, H] -> (out [N, H], load-balancing loss)."""
        s = self.s
        logits = self.router(x)  # [N, E]
        top_vals, top_ids = logits.topk(s.top_k, dim=-1)  # [N, k]
        weights = top_vals.float().softmax(-1).to(x.dtype)
        gu_w, d_w = self.gate_up_proj, self.down_proj
        if self.fake_quant:
            gu_w, d_w = fake_mxfp4(gu_w), fake_mxfp4(d_w)
        out = torch.zeros_like(x)
        flat_ids = top_ids.reshape(-1)  # [N*k]
        token_of = torch.arange(x.shape[0], device=x.device).repeat_interleave(s.top_k)  # [N*k]
        flat_w = weights.reshape(-1)
        order = flat_ids.argsort(stable=True)
        counts = torch.bincount(flat_ids, minlength=s.experts).tolist()
        start = 0
        for e, n in enumerate(counts):  # a training forward: one GEMM pair per expert
            if n == 0:
                continue
            sel = order[start:start + n]
            start += n
            tok = token_of[sel]
            h = x[tok] @ gu_w[e] + self.gate_up_proj_bias[e]  # [n, 2I], columns interleaved
            gate, up = h[:, 0::2].clamp(max=s.swiglu_limit), h[:, 1::2].clamp(-s.swiglu_limit, s.swiglu_limit)
            act = (up + 1) * gate * torch.sigmoid(ALPHA * gate)
            y = (act @ d_w[e] + self.down_proj_bias[e]) * flat_w[sel, None]
            out = out.index_add(0, tok, y.to(out.dtype))
        frac = torch.bincount(flat_ids, minlength=s.experts).float() / flat_ids.numel()  # [E]
        prob = logits.float().softmax(-1).mean(0)  # [E]
        return out, s.experts * (frac * prob).sum()


class Layer(nn.Module):
    def __init__(self, s: Shapes, sliding: bool) -> None:
        super().__init__()
        self.sliding = sliding
        self.input_layernorm = nn.Parameter(torch.ones(s.hidden))
        self.post_attention_layernorm = nn.Parameter(torch.ones(s.hidden))
        self.self_attn = Attention(s, sliding)
        self.mlp = MoE(s)


class DemoGptOss(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        s = self.s = Shapes.of(c)
        self.embed_tokens = nn.Embedding(s.vocab, s.hidden)
        nn.init.normal_(self.embed_tokens.weight, std=1.0)
        self.layers = nn.ModuleList(Layer(s, t == "sliding_attention") for t in c.layer_types)
        self.norm = nn.Parameter(torch.ones(s.hidden))
        self.lm_head = nn.Linear(s.hidden, s.vocab, bias=False)
        nn.init.normal_(self.lm_head.weight, std=s.hidden ** -0.5)
        for layer in self.layers:
            for lin in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj, layer.self_attn.o_proj,
                        layer.mlp.router):
                nn.init.normal_(lin.weight, std=lin.in_features ** -0.5)
                nn.init.zeros_(lin.bias)
            layer.self_attn.o_proj.weight.data /= math.sqrt(2 * s.layers)
        self.register_buffer("inv_freq", rope_inv_freq(c.rope, s.head_dim), persistent=False)
        self.rope_scale = c.rope.cos_sin_scale

    def set_fake_quant(self, on: bool) -> None:
        for layer in self.layers:
            layer.mlp.fake_quant = on

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ids [B, T] -> (logits [B, T, V] float32, mean load-balancing loss)."""
        b, t = ids.shape
        s = self.s
        pos = torch.arange(t, device=ids.device, dtype=torch.float32)
        freqs = pos[:, None] * self.inv_freq[None, :]  # [T, D/2]
        cos, sin = freqs.cos() * self.rope_scale, freqs.sin() * self.rope_scale
        i, j = torch.arange(t, device=ids.device)[:, None], torch.arange(t, device=ids.device)[None, :]
        causal = j <= i
        masks = {False: causal, True: causal & (j > i - s.window) if s.window else causal}
        x = self.embed_tokens(ids)
        aux = x.new_zeros((), dtype=torch.float32)
        for layer in self.layers:
            x = x + layer.self_attn(rms_norm(x, layer.input_layernorm, s.eps), cos, sin, masks[layer.sliding])
            h, lb = layer.mlp(rms_norm(x, layer.post_attention_layernorm, s.eps).reshape(b * t, -1))
            x = x + h.view(b, t, -1)
            aux = aux + lb
        x = rms_norm(x, self.norm, s.eps)
        return self.lm_head(x).float(), aux / len(self.layers)

    def checkpoint_tensors(self) -> dict[str, torch.Tensor]:
        """Hugging Face names -> float32 tensors, bf16-layout experts ([E, H, 2I], [E, I, H]; in x out)."""
        out = {"model.embed_tokens.weight": self.embed_tokens.weight}
        for n, layer in enumerate(self.layers):
            p = f"model.layers.{n}"
            a, m = layer.self_attn, layer.mlp
            out[f"{p}.input_layernorm.weight"] = layer.input_layernorm
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                out[f"{p}.self_attn.{name}.weight"] = getattr(a, name).weight
                out[f"{p}.self_attn.{name}.bias"] = getattr(a, name).bias
            out[f"{p}.self_attn.sinks"] = a.sinks
            out[f"{p}.post_attention_layernorm.weight"] = layer.post_attention_layernorm
            out[f"{p}.mlp.router.weight"] = m.router.weight
            out[f"{p}.mlp.router.bias"] = m.router.bias
            for name in ("gate_up_proj", "gate_up_proj_bias", "down_proj", "down_proj_bias"):
                out[f"{p}.mlp.experts.{name}"] = getattr(m, name)
        out["model.norm.weight"] = self.norm
        out["lm_head.weight"] = self.lm_head.weight
        return {k: v.detach().float().cpu() for k, v in out.items()}
