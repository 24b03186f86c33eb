"""Random experts for `bench moe`, one set per (shape, weight format), in quickmoe's kernel layouts, with what
each implementation needs: quickmoe's Triton experts (`fused_moe`), the torch reference, the bytes of the
experts hit, and (per shape) bf16 weights for the baselines.

Formats: "mxfp4" for gpt-oss shapes (biases, clamped SwiGLU); "bf16", "fp8" (block-scaled, scales
[E, K/128, N/R] as the layout stores 128 x 128 blocks) and "nvfp4" (E4M3 scales [E, K/16, N] + per-row global
scale) for the SiLU shapes of Qwen3-MoE and Mixtral (no biases). Values are random, never zeros, with output
std ~ input std.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from quickmoe.kernels.fused_moe import fused_moe, fused_moe_ref, swiglu_gpt_oss
from quickmoe.layouts.mxfp4_moe import Mxfp4MoELayout, split_gate_up
from quickmoe.layouts.quantized_moe import fp8_scale_rows

__all__ = ["GROUP", "MoEShape", "SHAPES", "ExpertSet", "make_experts"]

GROUP = 64  # the kernel layout's gate/up group


@dataclass(frozen=True)
class MoEShape:
    """hidden H, intermediate I, experts E, top-k, and the family's activation."""

    hidden: int
    inter: int
    experts: int
    top_k: int
    activation: str  # "swiglu_gpt_oss" (biases, MXFP4) or "silu" (no biases; bf16, FP8, NVFP4)

    @property
    def formats(self) -> tuple[str, ...]:
        return ("mxfp4",) if self.activation == "swiglu_gpt_oss" else ("bf16", "fp8", "nvfp4")


SHAPES = {
    "gpt-oss-20b": MoEShape(2880, 2880, 32, 4, "swiglu_gpt_oss"),
    "gpt-oss-120b": MoEShape(2880, 2880, 128, 4, "swiglu_gpt_oss"),
    # a rank's experts at tensor parallel 2 (1,440 intermediate columns: the last gate/up group of 64 ragged)
    "gpt-oss-20b-tp2": MoEShape(2880, 1440, 32, 4, "swiglu_gpt_oss"),
    "gpt-oss-120b-tp2": MoEShape(2880, 1440, 128, 4, "swiglu_gpt_oss"),
    "qwen3-30b-a3b": MoEShape(2048, 768, 128, 8, "silu"),
    "mixtral-8x7b": MoEShape(4096, 14336, 8, 2, "silu"),
    "tiny": MoEShape(256, 256, 8, 4, "swiglu_gpt_oss"),
    "tiny-silu": MoEShape(256, 128, 8, 2, "silu"),
}


@dataclass
class ExpertSet:
    """One shape's experts in one format: w1 [E, 2I, ...], w2 [E, H, ...] and the keyword arguments of
    fused_moe(_ref) that describe them."""

    shape: MoEShape
    fmt: str
    w1: torch.Tensor
    w2: torch.Tensor
    kwargs: dict
    b1: torch.Tensor | None = None
    b2: torch.Tensor | None = None

    def run(self, kernel: bool) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
        experts = fused_moe if kernel else fused_moe_ref
        return lambda x, w, ids: experts(x, w, ids, self.w1, self.b1, self.w2, self.b2, **self.kwargs)

    def bytes_hit(self, ids: torch.Tensor, tokens: int) -> int:
        """Bytes of the experts some token chose (weights, scales, biases) plus bf16 activations in and out."""
        hit = int(torch.unique(ids).numel())
        tensors = [self.w1, self.w2, *(t for t in (self.b1, self.b2) if t is not None),
                   *(t for t in self.kwargs.values() if isinstance(t, torch.Tensor))]
        per_expert = sum(t[0].numel() * t.element_size() for t in tensors)
        return hit * per_expert + 2 * tokens * self.shape.hidden * 2


def _normal(shape: tuple[int, ...], std: float, g: torch.Generator, device: torch.device) -> torch.Tensor:
    return (torch.randn(shape, generator=g) * std).to(device)


def make_experts(shape: MoEShape, fmt: str, device: torch.device, g: torch.Generator) -> ExpertSet:
    """Random experts of `shape` in format `fmt` (one of shape.formats), in the kernel layout."""
    e, h, i = shape.experts, shape.hidden, shape.inter
    common = dict(gate_up_group=GROUP, activation=shape.activation)
    if fmt == "mxfp4":
        def mx(n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
            blocks = torch.randint(0, 256, (e, n, k // 2), dtype=torch.uint8, generator=g).to(device)
            scales = torch.randint(119, 124, (e, k // 32, n), dtype=torch.uint8, generator=g).to(device)
            return blocks, scales

        (w1, s1), (w2, s2) = mx(2 * i, h), mx(h, i)
        return ExpertSet(shape, fmt, w1, w2, dict(common, w1_scales=s1, w2_scales=s2),
                         b1=_normal((e, 2 * i), 1.0, g, device).to(torch.bfloat16),
                         b2=_normal((e, h), 1.0, g, device).to(torch.bfloat16))
    if fmt == "bf16":
        return ExpertSet(shape, fmt, _normal((e, 2 * i, h), h ** -0.5, g, device).to(torch.bfloat16),
                         _normal((e, h, i), i ** -0.5, g, device).to(torch.bfloat16), common)
    if fmt == "fp8":
        def fp8(n: int, k: int, gate_up: bool) -> tuple[torch.Tensor, torch.Tensor]:
            """A block-scaled checkpoint's experts (blocks of 128 x 128) as the layout stores them: one scale per
            R kernel rows and 128 columns."""
            rows = fp8_scale_rows(n, 128, Mxfp4MoELayout(GROUP), gate_up)
            q = _normal((e, n, k), 64.0, g, device).clamp(-448, 448).to(torch.float8_e4m3fn)
            scales = (_normal((e, k // 128, n // rows), 0.1, g, device).abs() + 1) * (k ** -0.5 / 64)  # [E, K/128, N/R]
            return q, scales.float()

        (w1, s1), (w2, s2) = fp8(2 * i, h, True), fp8(h, i, False)
        return ExpertSet(shape, fmt, w1, w2, dict(common, w1_scales=s1, w2_scales=s2))
    if fmt == "nvfp4":
        def nv(n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            packed = torch.randint(0, 256, (e, n, k // 2), dtype=torch.uint8, generator=g).to(device)
            scales = (_normal((e, k // 16, n), 0.25, g, device).abs() + 1).to(torch.float8_e4m3fn)  # ~[1, 2)
            row = torch.full((e, n), k ** -0.5 / 4.5, dtype=torch.float32, device=device)  # E2M1 rms ~3, scale ~1.5
            return packed, scales, row

        (w1, s1, r1), (w2, s2, r2) = nv(2 * i, h), nv(h, i)
        return ExpertSet(shape, fmt, w1, w2, dict(common, w1_scales=s1, w2_scales=s2, w1_row_scale=r1,
                                                  w2_row_scale=r2))
    raise ValueError(f"format {fmt!r}: expected one of {shape.formats}")


def dense_twin(experts: ExpertSet) -> tuple[torch.Tensor, torch.Tensor]:
    """bf16 weights [E, 2I, H] (kernel gate/up order), [E, H, I] of the same shape, for the baselines (timing
    only: for quantized formats, random bf16 weights of the same shape)."""
    s = experts.shape
    if experts.fmt == "bf16":
        return experts.w1, experts.w2
    if experts.fmt == "mxfp4":
        from quickmoe.layouts.mxfp4_moe import dequantize_expert

        kw = experts.kwargs
        return (torch.stack([dequantize_expert(experts.w1[e], kw["w1_scales"][e], torch.bfloat16)
                             for e in range(s.experts)]),
                torch.stack([dequantize_expert(experts.w2[e], kw["w2_scales"][e], torch.bfloat16)
                             for e in range(s.experts)]))
    g = torch.Generator().manual_seed(1)
    return (_normal((s.experts, 2 * s.inter, s.hidden), s.hidden ** -0.5, g, experts.w1.device).to(torch.bfloat16),
            _normal((s.experts, s.hidden, s.inter), s.inter ** -0.5, g, experts.w1.device).to(torch.bfloat16))


def grouped_mm_experts(shape: MoEShape, x: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor, w1: torch.Tensor,
                       w2: torch.Tensor, b1: torch.Tensor | None, b2: torch.Tensor | None) -> torch.Tensor:
    """bf16 F.grouped_mm experts (the same maths as quickmoe's)."""
    num_tokens, top_k = ids.shape
    flat = ids.reshape(-1)
    order = torch.argsort(flat)
    offs = torch.cumsum(torch.bincount(flat, minlength=w1.shape[0]), 0).to(torch.int32)
    token_of = order // top_k
    gate_up = torch.nn.functional.grouped_mm(x[token_of], w1.transpose(-2, -1), offs=offs)  # [T*k, 2I]
    if b1 is not None:
        gate_up = gate_up + b1[flat[order]]
    if shape.activation == "silu":
        gate, up = split_gate_up(gate_up, GROUP)
        act = torch.nn.functional.silu(gate) * up
    else:
        act = swiglu_gpt_oss(gate_up, 7.0, 1.702, GROUP)
    y = torch.nn.functional.grouped_mm(act, w2.transpose(-2, -1), offs=offs)  # [T*k, H]
    if b2 is not None:
        y = y + b2[flat[order]]
    out = torch.zeros_like(x)
    return out.index_add_(0, token_of, y * weights.reshape(-1)[order, None].to(y.dtype))


def transformers_experts(experts: ExpertSet, w1: torch.Tensor, w2: torch.Tensor, device: torch.device):
    """transformers' experts module of the family (GptOssExperts, Qwen3MoeExperts, MixtralExperts) holding the
    bf16 weights (timing only: the gate/up row order does not matter here). Called as hf(x, ids, weights)."""
    s = experts.shape
    if s.activation == "swiglu_gpt_oss":
        from transformers import GptOssConfig
        from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts

        module = GptOssExperts(GptOssConfig(hidden_size=s.hidden, intermediate_size=s.inter,
                                            num_local_experts=s.experts))
    else:
        from transformers import Qwen3MoeConfig
        from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeExperts

        module = Qwen3MoeExperts(Qwen3MoeConfig(hidden_size=s.hidden, moe_intermediate_size=s.inter,
                                                num_experts=s.experts))
    module = module.to(device=device, dtype=torch.bfloat16)
    with torch.no_grad():
        if s.activation == "swiglu_gpt_oss":
            module.gate_up_proj.copy_(w1.transpose(-2, -1))
            module.down_proj.copy_(w2.transpose(-2, -1))
            module.gate_up_proj_bias.copy_(experts.b1)
            module.down_proj_bias.copy_(experts.b2)
        else:  # out x in, as Qwen3MoeExperts and MixtralExperts keep them
            module.gate_up_proj.copy_(w1)
            module.down_proj.copy_(w2)
    return module
