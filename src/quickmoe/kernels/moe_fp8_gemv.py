"""The FP8 MoE of a few tokens on CUDA cores: `moe_fp8_gemv` (Triton) beside `moe_fp8_gemv_ref` (torch), same
signature.

At decode sizes `fused_moe`'s tensor-core GEMMs stream the chosen experts' e4m3 weights through tiles of 8-16
assignments, of which a batch-1 step fills one: Qwen3-30B-A3B's GEMM 1 read its 25 MB at ~43% of the HBM copy rate
on the H200, where a kernel that only reads takes the same bytes at ~75% (docs/benchmarks.md, 2026-11-30 fifteenth
and 2026-12-01 eighth sessions). FP8 needs no decode (unlike MXFP4, whose CUDA-core GEMV was bound by its decode),
so a GEMV does less per weight byte: one program per (assignment, ROWS weight rows), each 128-column step's e4m3
rows converted to float32, multiplied by the assignment's quantized activations, summed and scaled by (activation
scale x weight scale), as the tensor-core kernels scale each step's dot. The activations are quantized as for the
GEMMs (`fp8_quant`); no alignment is needed (a program reads its assignment's expert id):
- `_moe_gemv1_kernel`: inter[a] = act(gate, up) of token a // k through expert topk_ids[a], rows [A, I] in the
  activations' dtype;
- `_moe_gemv2_kernel`: out[a] = (quantized inter[a] @ W2[e].T + b2[e]) x topk_weights[a], [A, H]: `fused_moe`'s
  per-assignment rows before the combine.
An assignment to id E (no expert here: another rank's under expert parallel, or a CUDA graph's padding row's) is
skipped by both kernels: its rows of `inter` and `out` are left as the memory held them (the reference gives
zeros), and the combine leaves it out (`moe_combine(absent_ids=)`).
The K loops are unrolled (Qwen3: 16 and 6 steps of 128 columns) so that the compiler can issue a program's weight
loads ahead of its sums (Triton pipelines only loads that feed a dot), and each tile of activations repeats the
token's row on every weight row, so both tiles share one layout and no sum crosses a warp. A first version that
quantized the activations inside the programs (the quantizer's IEEE divisions and a layout change every step) was
slower than the tensor-core path at every size (docs/benchmarks.md, 2026-12-02).
The sums run in another order than the tensor cores' (float32 products of the e4m3 values, 128 at a time): within
float32 rounding of `fused_moe_ref(..., fp8_activations=True)`, which quantizes the activations the same way.
Weights and scales are `fused_moe`'s FP8 kernel layout (gate/up groups of GROUP columns, scales [E, K/128, N/R]).
`fused_moe` takes this path where it measured faster (`fused_moe.fp8_gemv_max_tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from quickmoe.kernels.fused_moe import ACTIVATIONS, fused_moe_ref
from quickmoe.kernels.moe_gemm_operands import FP8_GROUP  # columns per activation scale and weight scale block
from quickmoe.kernels.pdl import pdl_kwargs

try:  # CPU installs without triton keep the torch reference
    import triton
    import triton.language as tl

    from quickmoe.kernels.fp8_gemv import gemv_step
    from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group
    from quickmoe.kernels.moe_gemm1_kernel import gate_up_activation
    from quickmoe.kernels.pdl import pdl_wait
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["Fp8GemvConfig", "moe_fp8_gemv", "moe_fp8_gemv_ref"]


@dataclass(frozen=True)
class Fp8GemvConfig:
    """Launch of the two GEMVs: weight rows a program (GEMM 1: gate rows, and as many up rows), warps, and the
    128-column groups a K step loads together. Rows and warps are the fastest of `scripts/probes/fp8_gemv_probe.py`'s
    sweep at Qwen3-30B-A3B's T = 1-8 on the H200 (rows 8-64, warps 1-8; docs/benchmarks.md, 2026-12-02); 4 groups a
    step were the fastest for GEMV 1 at T = 1-4 and for GEMV 2 at T = 4-8 (second session of 2026-12-02). One
    config serves every token count, so an assignment's row has the same bits at T = 1-8. The unrolled loops have
    no pipeline stages to tune."""

    rows1: int = 8
    warps1: int = 2
    rows2: int = 16
    warps2: int = 1
    groups1: int = 4  # 128-column groups a step (loads issued together), at most K / 128
    groups2: int = 4

    def __post_init__(self) -> None:
        for name in ("rows1", "rows2", "warps1", "warps2", "groups1", "groups2"):
            value = getattr(self, name)
            if value < 1 or value & (value - 1):
                raise ValueError(f"Fp8GemvConfig.{name} = {value}: expected a power of two >= 1")


def _check(hidden: torch.Tensor, topk_ids: torch.Tensor, w1: torch.Tensor, w1_scales: torch.Tensor,
           w2: torch.Tensor, w2_scales: torch.Tensor, gate_up_group: int, activation: str) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"moe_fp8_gemv: activation = {activation!r}: expected one of {list(ACTIVATIONS)}")
    experts, two_i, h = w1.shape
    if w1.dtype != torch.float8_e4m3fn or w2.dtype != torch.float8_e4m3fn:
        raise ValueError(f"moe_fp8_gemv: expected float8_e4m3fn experts, got {w1.dtype} and {w2.dtype}")
    if h % FP8_GROUP or (two_i // 2) % FP8_GROUP or tuple(w2.shape) != (experts, h, two_i // 2):
        raise ValueError(f"moe_fp8_gemv: w1 {tuple(w1.shape)} and w2 {tuple(w2.shape)} must be [E, 2I, H] and "
                         f"[E, H, I] with H and I multiples of {FP8_GROUP}")
    for name, w, s in (("w1_scales", w1, w1_scales), ("w2_scales", w2, w2_scales)):
        if s.dim() != 3 or s.shape[:2] != (experts, w.shape[2] // FP8_GROUP) or w.shape[1] % s.shape[2]:
            raise ValueError(f"moe_fp8_gemv: {name} {tuple(s.shape)}: expected [E, K/128, N / rows] for the "
                             f"weights {tuple(w.shape)}")
    if hidden.dim() != 2 or hidden.shape[1] != h or topk_ids.shape[0] != hidden.shape[0]:
        raise ValueError(f"moe_fp8_gemv: hidden {tuple(hidden.shape)} and topk_ids {tuple(topk_ids.shape)} do not "
                         f"match the experts' hidden size {h}")
    if gate_up_group < 1 or gate_up_group & (gate_up_group - 1):
        raise ValueError(f"moe_fp8_gemv: gate_up_group = {gate_up_group}: expected a power of two")


def moe_fp8_gemv_ref(hidden: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, w1: torch.Tensor,
                     w1_bias: torch.Tensor | None, w1_scales: torch.Tensor, w2: torch.Tensor,
                     w2_bias: torch.Tensor | None, w2_scales: torch.Tensor, *, gate_up_group: int,
                     activation: str = "silu", swiglu_limit: float = 7.0, swiglu_alpha: float = 1.702,
                     config: Fp8GemvConfig | None = None, hidden_q: torch.Tensor | None = None,
                     hidden_scales: torch.Tensor | None = None) -> torch.Tensor:
    """[T, H] -> [T * k, H]: assignment a's row, weighted by its routing weight (the reference MoE of each
    assignment alone, activations through FP8 per token and 128 columns); zeros for an assignment to id E (no
    expert here; the kernels leave its row undefined). `config` is the kernel's, unused; hidden_q / hidden_scales
    too (the reference quantizes hidden itself)."""
    _check(hidden, topk_ids, w1, w1_scales, w2, w2_scales, gate_up_group, activation)
    num_tokens, top_k = topk_ids.shape
    rows = []
    for a in range(num_tokens * top_k):
        t, j = divmod(a, top_k)
        if int(topk_ids[t, j]) >= w1.shape[0]:
            rows.append(hidden.new_zeros(1, w2.shape[1]))
            continue
        rows.append(fused_moe_ref(hidden[t:t + 1], topk_weights[t:t + 1, j:j + 1], topk_ids[t:t + 1, j:j + 1], w1,
                                  w1_bias, w2, w2_bias, w1_scales=w1_scales, w2_scales=w2_scales,
                                  gate_up_group=gate_up_group, swiglu_limit=swiglu_limit, swiglu_alpha=swiglu_alpha,
                                  activation=activation, fp8_activations=True))  # [1, H]
    return torch.cat(rows) if rows else hidden.new_empty(0, w2.shape[1])


def _step_groups(wanted: int, k: int) -> int:
    """The groups a step: the largest power of two <= wanted dividing K's groups (the steps cover K exactly)."""
    groups = k // FP8_GROUP
    c = 1
    while c * 2 <= wanted and groups % (c * 2) == 0:
        c *= 2
    return c


def moe_fp8_gemv(hidden: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, w1: torch.Tensor,
                 w1_bias: torch.Tensor | None, w1_scales: torch.Tensor, w2: torch.Tensor,
                 w2_bias: torch.Tensor | None, w2_scales: torch.Tensor, *, gate_up_group: int,
                 activation: str = "silu", swiglu_limit: float = 7.0, swiglu_alpha: float = 1.702,
                 config: Fp8GemvConfig | None = None, hidden_q: torch.Tensor | None = None,
                 hidden_scales: torch.Tensor | None = None) -> torch.Tensor:
    """The Triton kernels of `moe_fp8_gemv_ref`: the quantizer, GEMV 1, the quantizer, GEMV 2; no alignment
    (an assignment to id E: its row undefined, see the module docstring). hidden_q / hidden_scales: hidden already
    quantized per token and 128 columns with the quantizer's bits (e.g. by `rms_norm.fused_add_rms_norm_fp8`):
    GEMV 1 takes them and the first quantizer does not run."""
    if triton is None:
        raise RuntimeError("moe_fp8_gemv needs triton; moe_fp8_gemv_ref is the torch version")
    _check(hidden, topk_ids, w1, w1_scales, w2, w2_scales, gate_up_group, activation)
    config = config or Fp8GemvConfig()
    num_tokens, top_k = topk_ids.shape
    experts, two_i, h = w1.shape
    intermediate = two_i // 2
    group = gate_up_group
    rows1 = min(config.rows1, group)  # powers of two: rows1 divides the group
    num_assignments = num_tokens * top_k
    ids = topk_ids.reshape(-1)
    inter = torch.empty(num_assignments, intermediate, dtype=hidden.dtype, device=hidden.device)
    out = torch.empty(num_assignments, h, dtype=hidden.dtype, device=hidden.device)
    if num_assignments == 0:
        return out
    pdl = pdl_kwargs(hidden.device)
    if hidden_q is not None and hidden_scales is not None:
        xq, xs = hidden_q, hidden_scales
    else:
        xq, xs = quantize_fp8_per_token_group(hidden)  # [T, H] e4m3, [T, H/128]
    _moe_gemv1_kernel[(num_assignments, triton.cdiv(intermediate, group) * (group // rows1))](
        xq, xs, ids, w1, w1_scales, w1_bias if w1_bias is not None else w1_scales, inter, top_k, experts,
        float(swiglu_limit), float(swiglu_alpha), H=h, I=intermediate, GROUP=group,
        SCALE_ROWS=two_i // w1_scales.shape[2], ROWS=rows1, C=_step_groups(config.groups1, h),
        HAS_BIAS=w1_bias is not None,
        SILU=activation == "silu", num_warps=config.warps1, **pdl)
    iq, is_ = quantize_fp8_per_token_group(inter)  # [A, I] e4m3, [A, I/128]
    _moe_gemv2_kernel[(num_assignments, triton.cdiv(h, config.rows2))](
        iq, is_, ids, w2, w2_scales, w2_bias if w2_bias is not None else w2_scales, topk_weights.reshape(-1), out,
        experts, H=h, I=intermediate, SCALE_ROWS=h // w2_scales.shape[2], ROWS=config.rows2,
        C=_step_groups(config.groups2, intermediate), HAS_BIAS=w2_bias is not None,
        num_warps=config.warps2, **pdl)
    return out


if triton is not None:

    @triton.jit
    def _moe_gemv1_kernel(x_ptr, xs_ptr, ids_ptr, w_ptr, s_ptr, bias_ptr, out_ptr, top_k, num_experts, limit, alpha,
                      H: tl.constexpr, I: tl.constexpr, GROUP: tl.constexpr, SCALE_ROWS: tl.constexpr,
                      ROWS: tl.constexpr, C: tl.constexpr, HAS_BIAS: tl.constexpr, SILU: tl.constexpr,
                      PDL: tl.constexpr):
        pdl_wait(PDL)
        a = tl.program_id(0)  # the assignment: token a // k, expert topk_ids[a]
        pid_n = tl.program_id(1)
        token = (a // top_k).to(tl.int64)
        expert = tl.load(ids_ptr + a).to(tl.int64)
        if expert >= num_experts:  # no expert here: the row is left out
            return
        group = pid_n // (GROUP // ROWS)  # the gate/up group, and this program's part of its columns
        cols = (pid_n % (GROUP // ROWS)) * ROWS + tl.arange(0, ROWS)  # [R] within the group
        size = tl.minimum(I - group * GROUP, GROUP)  # GROUP except in a ragged last group
        ok = cols < size
        gate_rows = 2 * group * GROUP + cols  # [R]: the group's slab is `size` gate rows, then `size` up rows
        up_rows = gate_rows + size
        kk = tl.arange(0, C * 128)
        x_ptrs = x_ptr + token * H + kk[None, :] + 0 * cols[:, None]  # [R, C x 128]: the token's row on every row
        w_base = w_ptr + expert * (2 * I * H) + kk[None, :]
        groups = tl.arange(0, C)
        s_base = s_ptr + expert * (H // 128) * (2 * I // SCALE_ROWS) + groups[None, :] * (2 * I // SCALE_ROWS)
        gate = tl.zeros([ROWS], dtype=tl.float32)
        up = tl.zeros([ROWS], dtype=tl.float32)
        for k0 in tl.static_range(0, H, C * 128):  # unrolled: every step's loads can be issued ahead of its sums
            xs_ptrs = xs_ptr + token * (H // 128) + k0 // 128 + groups
            s_step = s_base + (k0 // 128) * (2 * I // SCALE_ROWS)
            gate += gemv_step(x_ptrs + k0, xs_ptrs, w_base + gate_rows[:, None] * H + k0, ok,
                          s_step + (gate_rows // SCALE_ROWS)[:, None], ROWS, C)
            up += gemv_step(x_ptrs + k0, xs_ptrs, w_base + up_rows[:, None] * H + k0, ok,
                        s_step + (up_rows // SCALE_ROWS)[:, None], ROWS, C)
        if HAS_BIAS:
            gate += tl.load(bias_ptr + expert * 2 * I + gate_rows, mask=ok, other=0.0).to(tl.float32)
            up += tl.load(bias_ptr + expert * 2 * I + up_rows, mask=ok, other=0.0).to(tl.float32)
        y = gate_up_activation(gate, up, limit, alpha, SILU)
        tl.store(out_ptr + a.to(tl.int64) * I + group * GROUP + cols, y.to(out_ptr.dtype.element_ty), mask=ok)

    @triton.jit
    def _moe_gemv2_kernel(x_ptr, xs_ptr, ids_ptr, w_ptr, s_ptr, bias_ptr, route_w_ptr, out_ptr, num_experts,
                      H: tl.constexpr, I: tl.constexpr, SCALE_ROWS: tl.constexpr, ROWS: tl.constexpr, C: tl.constexpr,
                      HAS_BIAS: tl.constexpr, PDL: tl.constexpr):
        pdl_wait(PDL)
        a = tl.program_id(0)
        expert = tl.load(ids_ptr + a).to(tl.int64)
        if expert >= num_experts:
            return
        rows = tl.program_id(1) * ROWS + tl.arange(0, ROWS)  # [R] output columns = weight rows
        ok = rows < H
        kk = tl.arange(0, C * 128)
        x_ptrs = x_ptr + a.to(tl.int64) * I + kk[None, :] + 0 * rows[:, None]  # [R, C x 128]: inter row a
        w_ptrs = w_ptr + expert * (H * I) + rows[:, None] * I + kk[None, :]
        groups = tl.arange(0, C)
        s_base = (s_ptr + expert * (I // 128) * (H // SCALE_ROWS) + groups[None, :] * (H // SCALE_ROWS)
                  + (rows // SCALE_ROWS)[:, None])
        acc = tl.zeros([ROWS], dtype=tl.float32)
        for k0 in tl.static_range(0, I, C * 128):
            xs_ptrs = xs_ptr + a.to(tl.int64) * (I // 128) + k0 // 128 + groups
            acc += gemv_step(x_ptrs + k0, xs_ptrs, w_ptrs + k0, ok, s_base + (k0 // 128) * (H // SCALE_ROWS), ROWS, C)
        if HAS_BIAS:
            acc += tl.load(bias_ptr + expert * H + rows, mask=ok, other=0.0).to(tl.float32)
        acc *= tl.load(route_w_ptr + a).to(tl.float32)
        tl.store(out_ptr + a.to(tl.int64) * H + rows, acc.to(out_ptr.dtype.element_ty), mask=ok)
