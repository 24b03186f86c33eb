"""The MoE experts for a few tokens (batch-1 and small-batch decode): MXFP4 weights, no tensor cores.

With T <= 4 tokens the grouped GEMMs of `moe_gemm` fill 16-row MMA tiles with one or two real rows, and their
time goes to decoding weights into mma fragments (the join of low and high nibbles into consecutive K pairs,
the operand's trip through shared memory), not to reading them. Here every program multiplies rows of one
expert's weights by one activation row, in float32 FMAs on CUDA cores:

- `moe_gemv1_swiglu`: program (assignment a, column tile n) decodes BLOCK_N gate rows and the matching up
  rows of expert topk_ids[a] (layout `layouts.mxfp4_moe`: [E, 2I, H/2] packed nibbles, transposed
  E8M0 scales [E, H/32, 2I], gate/up rows grouped by GROUP) BLOCK_K columns at a time; the low nibble of byte j
  is column 2j and the high nibble column 2j+1, so the low values meet the activation's even columns and the
  high values its odd ones (two [BN, BK/2] products, no interleave); the products stay in a [BN, BK/2] float32
  accumulator and are summed across K once at the end. Epilogue: bias, gpt-oss's clamped SwiGLU (or SiLU(gate)
  * up) -> inter [A, I].
- `moe_gemv2_combine`: program (token t, row tile n) loops over the token's k assignments in order, each the
  down projection of inter[t * k + j] through its expert (+ bias) times the routing weight, summed in float32
  -> out [T, H]: GEMM 2 and the combine in one launch, in `moe_combine`'s fixed order.

`fused_moe_gemv` runs both and equals `fused_moe_ref` (tests/kernels/test_moe_gemv.py). Decoding is the
inline-PTX E2M1 x E8M0 -> bf16 of `moe_gemm` on the GPU (exact), and the float16 route in Triton's CPU
interpreter. Which token counts take this path is measured (`fused_moe`, GEMV_MAX_TOKENS).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from quickmoe.kernels.moe_gemm import _MXFP4_TO_BF16_PTX_TEXT

try:  # CPU installs without triton keep the torch references
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["GemvConfig", "fused_moe_gemv", "moe_gemv1_swiglu", "moe_gemv2_combine"]


@dataclass(frozen=True)
class GemvConfig:
    """Tiles of the two GEMV kernels: rows per program (block_n1 for gate_up, a divisor of the gate/up group;
    block_n2 for down), columns per K step (a multiple of 32: whole MX blocks), warps."""

    block_n1: int = 16
    block_n2: int = 16
    block_k: int = 256
    num_warps: int = 4

    def __post_init__(self) -> None:
        for name in ("block_n1", "block_n2", "block_k", "num_warps"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1 or value & (value - 1):
                raise ValueError(f"GemvConfig.{name} = {value!r}: expected a power of two")
        if self.block_k % 32:
            raise ValueError(f"GemvConfig.block_k = {self.block_k}: expected a multiple of 32 (one MX block)")


def moe_gemv1_swiglu(hidden: torch.Tensor, topk_ids: torch.Tensor, w1: torch.Tensor, w1_bias: torch.Tensor | None,
                     w1_scales: torch.Tensor, group: int, limit: float, alpha: float, *,
                     activation: str = "swiglu_gpt_oss", config: GemvConfig = GemvConfig()) -> torch.Tensor:
    """hidden [T, H], topk_ids [T, k] -> inter [T*k, I] in hidden's dtype (row a: token a // k through expert
    topk_ids[a]); w1 MXFP4 [E, 2I, H/2] with scales [E, H/32, 2I], gate/up rows grouped by `group`."""
    num_tokens, top_k = topk_ids.shape
    intermediate, hidden_size = w1.shape[1] // 2, w1.shape[2] * 2
    block_n = min(config.block_n1, group)
    inter = torch.empty(num_tokens * top_k, intermediate, dtype=hidden.dtype, device=hidden.device)
    grid = (num_tokens * top_k, triton.cdiv(intermediate, group) * (group // block_n))
    _gemv1_kernel[grid](hidden, topk_ids, w1, w1_scales, w1_bias if w1_bias is not None else w1, inter,
                        hidden.stride(0), float(limit), float(alpha), TOP_K=top_k, H=hidden_size, I=intermediate,
                        GROUP=group, BLOCK_N=block_n, BLOCK_K=config.block_k, HAS_BIAS=w1_bias is not None,
                        SILU=activation == "silu", PTX=hidden.device.type == "cuda", num_warps=config.num_warps)
    return inter


def moe_gemv2_combine(inter: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w2: torch.Tensor,
                      w2_bias: torch.Tensor | None, w2_scales: torch.Tensor, *,
                      config: GemvConfig = GemvConfig()) -> torch.Tensor:
    """inter [T*k, I] -> out [T, H] = sum_j (inter[t*k+j] @ W2[e_j].T + b2[e_j]) * topk_weights[t, j];
    w2 MXFP4 [E, H, I/2] with scales [E, I/32, H]."""
    num_tokens, top_k = topk_ids.shape
    hidden_size, intermediate = w2.shape[1], w2.shape[2] * 2
    out = torch.empty(num_tokens, hidden_size, dtype=inter.dtype, device=inter.device)
    grid = (num_tokens, triton.cdiv(hidden_size, config.block_n2))
    _gemv2_kernel[grid](inter, topk_ids, topk_weights, w2, w2_scales, w2_bias if w2_bias is not None else w2, out,
                        TOP_K=top_k, H=hidden_size, I=intermediate, BLOCK_N=config.block_n2,
                        BLOCK_K=config.block_k, HAS_BIAS=w2_bias is not None, PTX=inter.device.type == "cuda",
                        num_warps=config.num_warps)
    return out


def fused_moe_gemv(hidden: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, w1: torch.Tensor,
                   w1_bias: torch.Tensor | None, w2: torch.Tensor, w2_bias: torch.Tensor | None, *,
                   w1_scales: torch.Tensor, w2_scales: torch.Tensor, gate_up_group: int, swiglu_limit: float = 7.0,
                   swiglu_alpha: float = 1.702, activation: str = "swiglu_gpt_oss",
                   config: GemvConfig = GemvConfig()) -> torch.Tensor:
    """`fused_moe_ref` for MXFP4 experts in two launches (see the module docstring); [T, H] in hidden's dtype."""
    if triton is None:
        raise RuntimeError("the MoE kernels need triton (pip install triton); fused_moe_ref is the torch version")
    if w1.dtype != torch.uint8 or w1_scales is None or w1_scales.dtype != torch.uint8:
        raise ValueError("fused_moe_gemv: expected MXFP4 experts (uint8 blocks and E8M0 scales)")
    inter = moe_gemv1_swiglu(hidden, topk_ids, w1, w1_bias, w1_scales, gate_up_group, swiglu_limit, swiglu_alpha,
                             activation=activation, config=config)
    return moe_gemv2_combine(inter, topk_ids, topk_weights, w2, w2_bias, w2_scales, config=config)


if triton is not None:
    _PTX = tl.constexpr(_MXFP4_TO_BF16_PTX_TEXT)

    @triton.jit
    def _decoded_pairs(w_ptr, s_ptr, expert, rows, row_ok, k0, N, K, BLOCK_K: tl.constexpr, PTX: tl.constexpr):
        """Rows `rows` [R] of expert `expert`'s MXFP4 [N, K] weight, columns [k0, k0 + BLOCK_K) -> (even, odd):
        float32 [R, BLOCK_K / 2], the values of columns k0 + 2j and k0 + 2j + 1 (zero where masked)."""
        byte_cols = k0 // 2 + tl.arange(0, BLOCK_K // 2)  # [BK/2]
        ok = row_ok[:, None] & (byte_cols[None, :] < K // 2)
        packed = tl.load(w_ptr + expert * N * (K // 2) + rows[:, None] * (K // 2) + byte_cols[None, :], mask=ok,
                         other=0)  # [R, BK/2] uint8
        scale = tl.load(s_ptr + expert * (K // 32) * N + (byte_cols // 16)[None, :] * N + rows[:, None], mask=ok,
                        other=127)  # [R, BK/2]: each byte's block scale (16 bytes a block; L1 serves repeats)
        if PTX:
            # 2^(s-127) as bf16: exponent field s; s = 0 is the subnormal 2^-127 (0x0040)
            factor = tl.where(scale == 0, 0x40, scale.to(tl.uint16) << 7).to(tl.uint16).to(tl.bfloat16,
                                                                                            bitcast=True)
            even, odd = tl.inline_asm_elementwise(_PTX, "=r,=r,=r,=r,r,r,r", [packed, factor],
                                                  dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)
            even = even.to(tl.float32)
            odd = odd.to(tl.float32)
        else:
            # E2M1 bits s e e m as a float16 (exponent field e, mantissa msb m): the E2M1 value times 2^-14
            factor = tl.exp2(scale.to(tl.float32) - 127.0) * 16384.0
            lo = packed & 0xF
            hi = packed >> 4
            even = ((((lo & 7).to(tl.uint16) << 9) | ((lo & 8).to(tl.uint16) << 12)).to(tl.float16, bitcast=True)
                    .to(tl.float32) * factor)
            odd = ((((hi & 7).to(tl.uint16) << 9) | ((hi & 8).to(tl.uint16) << 12)).to(tl.float16, bitcast=True)
                   .to(tl.float32) * factor)
        return even, odd

    @triton.jit
    def _gemv1_kernel(x_ptr, ids_ptr, w_ptr, s_ptr, bias_ptr, out_ptr, stride_x, limit, alpha,
                      TOP_K: tl.constexpr, H: tl.constexpr, I: tl.constexpr, GROUP: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, HAS_BIAS: tl.constexpr, SILU: tl.constexpr,
                      PTX: tl.constexpr):
        assign = tl.program_id(0)
        pid_n = tl.program_id(1)
        expert = tl.load(ids_ptr + assign).to(tl.int64)
        token = assign // TOP_K
        group = pid_n // (GROUP // BLOCK_N)  # the gate/up group, and this program's part of its columns
        cols = (pid_n % (GROUP // BLOCK_N)) * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN] within the group
        size = tl.minimum(I - group * GROUP, GROUP)  # GROUP except in a ragged last group
        n_ok = cols < size
        gate_rows = 2 * group * GROUP + cols  # [BN]: the group's slab is `size` gate rows, then `size` up rows
        up_rows = gate_rows + size
        acc_gate = tl.zeros([BLOCK_N, BLOCK_K // 2], dtype=tl.float32)
        acc_up = tl.zeros([BLOCK_N, BLOCK_K // 2], dtype=tl.float32)
        for k0 in range(0, H, BLOCK_K):
            pair = k0 + 2 * tl.arange(0, BLOCK_K // 2)  # [BK/2] even columns
            x_even = tl.load(x_ptr + token * stride_x + pair, mask=pair < H, other=0.0).to(tl.float32)
            x_odd = tl.load(x_ptr + token * stride_x + pair + 1, mask=pair + 1 < H, other=0.0).to(tl.float32)
            even, odd = _decoded_pairs(w_ptr, s_ptr, expert, gate_rows, n_ok, k0, 2 * I, H, BLOCK_K, PTX)
            acc_gate += even * x_even[None, :] + odd * x_odd[None, :]
            even, odd = _decoded_pairs(w_ptr, s_ptr, expert, up_rows, n_ok, k0, 2 * I, H, BLOCK_K, PTX)
            acc_up += even * x_even[None, :] + odd * x_odd[None, :]
        gate = tl.sum(acc_gate, axis=1)  # [BN]
        up = tl.sum(acc_up, axis=1)
        if HAS_BIAS:
            gate += tl.load(bias_ptr + expert * 2 * I + gate_rows, mask=n_ok, other=0.0).to(tl.float32)
            up += tl.load(bias_ptr + expert * 2 * I + up_rows, mask=n_ok, other=0.0).to(tl.float32)
        if SILU:  # Mixtral, Qwen-MoE: SiLU(gate) * up
            y = gate * tl.sigmoid(gate) * up
        else:  # gpt-oss: gate clamped above, up on both sides, (up + 1) * gate * sigmoid(alpha * gate)
            gate = tl.minimum(gate, limit)
            up = tl.minimum(tl.maximum(up, -limit), limit)
            y = (up + 1.0) * (gate * tl.sigmoid(alpha * gate))
        tl.store(out_ptr + assign * I + group * GROUP + cols, y.to(out_ptr.dtype.element_ty), mask=n_ok)

    @triton.jit
    def _gemv2_kernel(x_ptr, ids_ptr, route_w_ptr, w_ptr, s_ptr, bias_ptr, out_ptr, TOP_K: tl.constexpr,
                      H: tl.constexpr, I: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      HAS_BIAS: tl.constexpr, PTX: tl.constexpr):
        token = tl.program_id(0)
        rows = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN] output columns = weight rows
        n_ok = rows < H
        total = tl.zeros([BLOCK_N], dtype=tl.float32)
        for j in tl.static_range(TOP_K):  # the token's assignments in order: moe_combine's sum
            assign = token * TOP_K + j
            expert = tl.load(ids_ptr + assign).to(tl.int64)
            acc = tl.zeros([BLOCK_N, BLOCK_K // 2], dtype=tl.float32)
            for k0 in range(0, I, BLOCK_K):
                pair = k0 + 2 * tl.arange(0, BLOCK_K // 2)
                x_even = tl.load(x_ptr + assign * I + pair, mask=pair < I, other=0.0).to(tl.float32)
                x_odd = tl.load(x_ptr + assign * I + pair + 1, mask=pair + 1 < I, other=0.0).to(tl.float32)
                even, odd = _decoded_pairs(w_ptr, s_ptr, expert, rows, n_ok, k0, H, I, BLOCK_K, PTX)
                acc += even * x_even[None, :] + odd * x_odd[None, :]
            y = tl.sum(acc, axis=1)  # [BN]
            if HAS_BIAS:
                y += tl.load(bias_ptr + expert * H + rows, mask=n_ok, other=0.0).to(tl.float32)
            route_w = tl.load(route_w_ptr + assign).to(tl.float32)
            total += (y * route_w).to(out_ptr.dtype.element_ty).to(tl.float32)  # rounded as moe_gemm2's [A, H] rows
        tl.store(out_ptr + token * H + rows, total.to(out_ptr.dtype.element_ty), mask=n_ok)
