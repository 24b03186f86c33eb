"""Paged decode attention (one new query per sequence), split over the context: `paged_decode_attention`
(Triton) beside `paged_decode_attention_ref` (torch), same signature; and the same with RoPE and the KV-cache
write of the new token first, `rotary_paged_decode_attention` beside `rotary_paged_decode_attention_ref`
(= `rotary_write_kv_ref`, then `paged_decode_attention_ref`).

q [B, H, D] holds each sequence's query at position context_lens[b] - 1; it attends to the keys j <= that
position (with a window W > 0 only j > position - W) of its paged cache, GQA (head h reads KV head
h // (H / KV)), and gpt-oss's per-head sink logit joins the softmax denominator only:
    out_h = sum_j exp(s_hj) v_j / (sum_j exp(s_hj) + exp(sink_h)),   s_hj = scale * q_h . k_j.
Cache per layer: k_cache, v_cache [num_blocks, block_size, KV, D]; position p of sequence b is row p % block_size
of block block_tables[b][p // block_size] (-1 where a sliding window released it); slot-major or head-major in
memory (`paged_kv_tile.kv_cache_head_major`).

The kernel (flash-decoding): grid (B, KV heads, splits), or (KV heads, B, splits) (`DecodeLaunchConfig`: the
heads of a sequence launched side by side read its cache blocks together). A program takes the GROUP = H / KV
query heads of its KV head together (padded to 16 rows: one tensor-core tile, `tl.dot`) and one contiguous span
of the visible keys, BLOCK_N keys per iteration gathered across cache blocks through the block table; it keeps an
online softmax (running max m, sum l, accumulator acc, base-2 exponentials). With one split it finishes the
softmax itself (sink included); with several, each writes (m, l, acc) and `_decode_combine_kernel` merges them:
    M = max(max_s m_s, sink),  out = sum_s 2^(m_s - M) acc_s / (sum_s 2^(m_s - M) l_s + 2^(sink - M)).
(Merging in the split kernel instead, by its last program to take a ticket, was measured slower on the H100:
13.1 against 8.6 us a gpt-oss-20b layer at batch 1 for the three launches it replaced, 2026-11-24.)
The number of splits and the launch config depend on B and the layer's window only (a CUDA graph fixes them at
capture; `decode_num_splits`, `decode_launch_config` in kernels/decode_launch.py, tuned on the H100 and the H200);
each program finds its span from context_lens on the device, so nothing is read on the host. A sliding-window
layer's spans cover only the window: released blocks are never read. (Each 64-position block's K and V loaded by
TMA into a ring of num_stages buffers instead of gathered pointer loads tied at best and lost 1-16% elsewhere on the
H200, and cache blocks of 64 positions took 0.6-1% off the largest points: 2026-12-01, decode_tma_probe.py.)

With RoPE (`rotary_paged_decode_attention`, the decode step's path: one launch where RoPE + KV write and the
attention were two): q is read from the fused projection's output qkv [B, (H + 2 KV) D] and rotated in each
program (the rounding of `rotary_write_kv`: cos and sin in the activations' dtype, each output in float32 rounded
once), and the program whose span holds the new position (context_lens[b] - 1) rotates that token's k of its KV
head, writes k and v into the cache at slot_mapping[b] (-1: padding, nothing written) and synchronises its
threads before reading the span, which ends at that key. Other programs never read the new position. (Attending to
the new key from registers instead, as one more online-softmax step after the loop with the write after it, so
no store and barrier stand before the span's copies, was 2-12% slower on the H200: 2026-12-01 fifth session.)
With `qk_norm` = (q_weight, k_weight, eps) (Qwen3) q's and k's heads are RMS-normalised first, each program on the
halves it rotates (`rms_norm.head_rms_norm_halves`): `qk_rms_norm`'s launch folded in (a head's last bit may differ:
its squares are summed in two halves). With `fp8_out` (an FP8 o_proj after it: Qwen3 FP8) the kernel that writes a
head's output (the combine, or the split kernel with one split) also quantizes it to FP8 per token and 128 columns,
the activation quantizer's bits (`fp8_quant.quantize_groups`; head_dim whole groups), so o_proj's quantizer does
not run; the combine then lets the FP8 GEMV after it launch at once (`pdl.pdl_early_trigger`: it reads its first
weights before its wait).
"""

from __future__ import annotations

import torch

from quickmoe.kernels.decode_launch import DecodeLaunchConfig, decode_launch_config, decode_num_splits, gpu_name
from quickmoe.kernels.paged_kv_tile import kv_cache_head_major
from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group_ref
from quickmoe.kernels.pdl import pdl_early_trigger, pdl_kwargs
from quickmoe.kernels.rms_norm import qk_rms_norm_ref
from quickmoe.kernels.rotary_kv_write import rotary_write_kv_ref

try:  # CPU installs without triton keep the torch reference
    import triton
    import triton.language as tl

    from quickmoe.kernels.fp8_quant import quantize_groups
    from quickmoe.kernels.pdl import pdl_trigger, pdl_wait
except ImportError:  # pragma: no cover
    triton = None
else:
    from quickmoe.kernels.paged_kv_tile import load_kv_tile, pv_dot, qk_dot
    from quickmoe.kernels.rotary_kv_write import rotate_and_write_kv

__all__ = ["paged_decode_attention", "paged_decode_attention_ref", "rotary_paged_decode_attention",
           "rotary_paged_decode_attention_ref", "rotary_supported"]

LOG2E = 1.4426950408889634
FP8_GROUP = 128  # columns per scale of the FP8 output (the FP8 layers' activation groups)


def paged_decode_attention_ref(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                               block_tables: torch.Tensor, context_lens: torch.Tensor, sinks: torch.Tensor,
                               window: int, scale: float) -> torch.Tensor:
    """Per sequence, in float32: gathers its positions from the block table and applies the definition."""
    num_heads, num_kv = q.shape[1], k_cache.shape[2]
    block_size = k_cache.shape[1]
    out = torch.empty_like(q)
    for b, ctx in enumerate(context_lens.tolist()):
        pos = torch.arange(ctx, device=q.device)  # [L] every position up to the query's
        visible = pos > (ctx - 1) - window if window > 0 else torch.ones_like(pos, dtype=torch.bool)
        pos = pos[visible]
        blocks = block_tables[b, pos // block_size].long()  # [L']
        k = k_cache[blocks, pos % block_size].float().repeat_interleave(num_heads // num_kv, dim=1)  # [L', H, D]
        v = v_cache[blocks, pos % block_size].float().repeat_interleave(num_heads // num_kv, dim=1)
        logits = torch.einsum("hd,lhd->hl", q[b].float(), k) * scale  # [H, L']
        combined = torch.cat([logits, sinks.float()[:, None]], dim=1)  # the sink as one more logit
        probs = torch.softmax(combined, dim=1)[:, :-1]  # ...that takes no value
        out[b] = torch.einsum("hl,lhd->hd", probs, v).to(q.dtype)
    return out


def rotary_paged_decode_attention_ref(qkv: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
                                      k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor,
                                      block_tables: torch.Tensor, context_lens: torch.Tensor, sinks: torch.Tensor,
                                      window: int, scale: float, qk_norm: tuple | None = None,
                                      fp8_out: bool = False) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """qkv [B, (H + 2 KV) D] -> [B, H, D]: `rotary_write_kv_ref` (RoPE; the new k and v into the cache), then
    `paged_decode_attention_ref` of the rotated q. qk_norm (q_weight, k_weight, eps): `qk_rms_norm_ref` first.
    fp8_out: (out, its rows [B, H D] quantized per token and 128 columns: e4m3 [B, H D], scales [B, H D / 128])."""
    if qk_norm is not None:
        num_kv, head_dim = k_cache.shape[2], k_cache.shape[3]
        q_weight, k_weight, eps = qk_norm
        qkv = qk_rms_norm_ref(qkv, q_weight, k_weight, qkv.shape[1] // head_dim - 2 * num_kv, num_kv, eps)
    q = rotary_write_kv_ref(qkv, positions, cos_sin_cache, k_cache, v_cache, slot_mapping)
    out = paged_decode_attention_ref(q, k_cache, v_cache, block_tables, context_lens, sinks, window, scale)
    if not fp8_out:
        return out
    return out, *quantize_fp8_per_token_group_ref(out.reshape(out.shape[0], -1), FP8_GROUP)


def paged_decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_tables: torch.Tensor, context_lens: torch.Tensor, sinks: torch.Tensor,
                           window: int, scale: float, num_splits: int | None = None,
                           config: DecodeLaunchConfig | None = None) -> torch.Tensor:
    """`paged_decode_attention_ref` in one or two Triton launches (see the module docstring). `num_splits` None picks
    `decode_num_splits(B, window)`, `config` None `decode_launch_config`."""
    return _launch(q, None, k_cache, v_cache, block_tables, context_lens, sinks, window, scale, num_splits, config,
                   False)


def rotary_paged_decode_attention(qkv: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
                                  k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor,
                                  block_tables: torch.Tensor, context_lens: torch.Tensor, sinks: torch.Tensor,
                                  window: int, scale: float, num_splits: int | None = None,
                                  config: DecodeLaunchConfig | None = None, qk_norm: tuple | None = None,
                                  fp8_out: bool = False) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """`rotary_paged_decode_attention_ref` in one or two Triton launches, as `paged_decode_attention` (head_dim
    a power of two >= 16: `rotary_supported`); qk_norm (q_weight [D], k_weight [D], eps) and fp8_out (head_dim a
    multiple of 128) in the same launches."""
    num_kv, head_dim = k_cache.shape[2], k_cache.shape[3]
    if not rotary_supported(head_dim):
        raise ValueError(f"rotary_paged_decode_attention: head_dim {head_dim}; the kernel takes powers of two >= 16")
    if qkv.dim() != 2 or qkv.stride(1) != 1 or qkv.shape[1] % head_dim or qkv.shape[1] // head_dim <= 2 * num_kv:
        raise ValueError(f"rotary_paged_decode_attention: qkv {tuple(qkv.shape)}; expected [B, (H + 2 KV) D] with "
                         f"D = {head_dim}, KV = {num_kv}, rows contiguous")
    num_heads = qkv.shape[1] // head_dim - 2 * num_kv
    q = qkv[:, :num_heads * head_dim].view(qkv.shape[0], num_heads, head_dim)  # the kernel reads q, k, v from qkv
    if qk_norm is not None and any(w.shape != (head_dim,) or w.stride(0) != 1 for w in qk_norm[:2]):
        raise ValueError(f"rotary_paged_decode_attention: qk_norm weights {[tuple(w.shape) for w in qk_norm[:2]]}; "
                         f"expected contiguous [{head_dim}]")
    if fp8_out and head_dim % FP8_GROUP:
        raise ValueError(f"rotary_paged_decode_attention: fp8_out needs heads of whole {FP8_GROUP}-column groups; "
                         f"head_dim {head_dim}")
    rotary = (qkv, positions, cos_sin_cache, slot_mapping, qk_norm)
    return _launch(q, rotary, k_cache, v_cache, block_tables, context_lens, sinks, window, scale, num_splits, config,
                   fp8_out)


def rotary_supported(head_dim: int) -> bool:
    """Whether `rotary_paged_decode_attention` takes this head size (else RoPE + KV write, then the attention)."""
    return triton is not None and head_dim >= 16 and head_dim & (head_dim - 1) == 0


def _launch(q: torch.Tensor, rotary: tuple | None, k_cache: torch.Tensor, v_cache: torch.Tensor,
            block_tables: torch.Tensor, context_lens: torch.Tensor, sinks: torch.Tensor, window: int, scale: float,
            num_splits: int | None, config: DecodeLaunchConfig | None,
            fp8_out: bool) -> torch.Tensor | tuple[torch.Tensor, ...]:
    if triton is None:
        raise RuntimeError("paged_decode_attention needs triton; paged_decode_attention_ref is the torch version")
    batch, num_heads, head_dim = q.shape
    _, block_size, num_kv, _ = k_cache.shape
    head_major = kv_cache_head_major(k_cache, v_cache)
    group = num_heads // num_kv
    out = torch.empty(batch, num_heads, head_dim, dtype=q.dtype, device=q.device)
    # fp8_out: out's rows [B, H D] quantized per 128 columns (e4m3 bits, scales); else placeholders
    out_q = torch.empty(batch, num_heads * head_dim, dtype=torch.float8_e4m3fn, device=q.device) if fp8_out else out
    out_scales = (torch.empty(batch, num_heads * head_dim // FP8_GROUP, dtype=torch.float32, device=q.device)
                  if fp8_out else out)
    result = (out, out_q, out_scales) if fp8_out else out
    if batch == 0:
        return result
    fp8 = dict(q8_ptr=out_q.view(torch.uint8) if fp8_out else out, s8_ptr=out_scales, FP8_OUT=fp8_out,
               HW_ROUND=q.device.type == "cuda")
    splits = num_splits if num_splits is not None else decode_num_splits(batch, num_kv, q.device, window=window,
                                                                             head_dim=head_dim)
    fp32_dot = q.device.type == "cpu" or k_cache.dtype == torch.float32  # the interpreter's bf16 dot is wrong
    d_pow2 = max(16, triton.next_power_of_2(head_dim))
    if config is None:
        config = decode_launch_config(batch, num_kv, head_dim, window, gpu_name(q.device))
    if splits == 1:
        partial_acc = partial_ml = out  # unused: the program normalises and writes `out` itself
    else:
        partial_acc = torch.empty(batch, num_heads, splits, d_pow2, dtype=torch.float32, device=q.device)
        partial_ml = torch.empty(batch, num_heads, splits, 2, dtype=torch.float32, device=q.device)
    if rotary is not None:
        qkv, positions, cos_sin_cache, slot_mapping, qk_norm = rotary
        q_w, k_w, eps = qk_norm if qk_norm is not None else (qkv, qkv, 0.0)
        rope = dict(pos_ptr=positions, cos_sin_ptr=cos_sin_cache, slot_ptr=slot_mapping,
                    stride_cs=cos_sin_cache.stride(0), q_w_ptr=q_w, k_w_ptr=k_w, norm_eps=float(eps),
                    QK_NORM=qk_norm is not None)
        q_arg, stride_qb, stride_qh = qkv, qkv.stride(0), head_dim
    else:
        rope = dict(pos_ptr=q, cos_sin_ptr=q, slot_ptr=q, stride_cs=0, q_w_ptr=q, k_w_ptr=q, norm_eps=0.0,
                    QK_NORM=False)
        q_arg, stride_qb, stride_qh = q, q.stride(0), q.stride(1)
    grid = (num_kv, batch, splits) if config.kv_fastest else (batch, num_kv, splits)
    _decode_split_kernel[grid](
        q_arg, k_cache, v_cache, block_tables, context_lens, sinks, out, partial_acc, partial_ml,
        stride_qb=stride_qb, stride_qh=stride_qh, stride_ob=out.stride(0), stride_oh=out.stride(1),
        stride_bt=block_tables.stride(0), window=window, qk_scale=float(scale) * LOG2E, **rope,
        GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)), D=head_dim, D_POW2=d_pow2,
        BLOCK_SIZE=block_size, KV=num_kv, HEAD_MAJOR=head_major, BLOCK_N=config.block_n, SPLITS=splits,
        FP32_DOT=fp32_dot, ROTARY=rotary is not None, KV_FASTEST=config.kv_fastest, **fp8,
        num_warps=config.num_warps, num_stages=config.num_stages, **pdl_kwargs(q.device))
    if splits > 1:
        # with fp8_out the FP8 GEMV after it may launch at once and read its first weights beside it
        early = fp8_out and pdl_early_trigger(q.device, batch * num_heads, 1)
        _decode_combine_kernel[(batch, num_heads)](partial_acc, partial_ml, sinks, out, out.stride(0), out.stride(1),
                                                   D=head_dim, D_POW2=d_pow2, SPLITS=splits, EARLY=early, **fp8,
                                                   num_warps=1, **pdl_kwargs(q.device))
    return result


if triton is not None:

    @triton.jit(do_not_specialize=["stride_bt"])  # the tables' width varies in eager steps (prefill_attention.py)
    def _decode_split_kernel(q_ptr, k_cache_ptr, v_cache_ptr, block_tables_ptr, context_lens_ptr, sinks_ptr,
                             out_ptr, part_acc_ptr, part_ml_ptr, pos_ptr, cos_sin_ptr, slot_ptr, q_w_ptr, k_w_ptr,
                             q8_ptr, s8_ptr,
                             stride_qb, stride_qh, stride_ob, stride_oh, stride_bt, stride_cs, window, qk_scale,
                             norm_eps,
                             GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, D: tl.constexpr, D_POW2: tl.constexpr,
                             BLOCK_SIZE: tl.constexpr, KV: tl.constexpr, HEAD_MAJOR: tl.constexpr,
                             BLOCK_N: tl.constexpr, SPLITS: tl.constexpr, FP32_DOT: tl.constexpr, ROTARY: tl.constexpr,
                             KV_FASTEST: tl.constexpr, QK_NORM: tl.constexpr, FP8_OUT: tl.constexpr,
                             HW_ROUND: tl.constexpr, PDL: tl.constexpr):
        pdl_wait(PDL)
        if KV_FASTEST:
            kv_head = tl.program_id(0)
            seq = tl.program_id(1)
        else:
            seq = tl.program_id(0)
            kv_head = tl.program_id(1)
        split = tl.program_id(2)
        rows = tl.arange(0, GROUP_PAD)  # query heads of this KV head, padded to a tensor-core tile
        row_ok = rows < GROUP
        heads = kv_head * GROUP + rows
        dims = tl.arange(0, D_POW2)
        dim_ok = dims < D
        ctx = tl.load(context_lens_ptr + seq).to(tl.int32)  # positions in 32 bits (int64 lens: 64-bit loop math)
        first = tl.where(window > 0, tl.maximum(ctx - window, 0), 0)  # the first visible key
        per_split = tl.cdiv(tl.cdiv(ctx - first, SPLITS), BLOCK_N) * BLOCK_N
        lo = first + split * per_split
        hi = tl.minimum(lo + per_split, ctx)
        if ROTARY:  # the new key (position ctx - 1) is in this program's span: write it first
            slot = tl.load(slot_ptr + seq).to(tl.int64)
            write = (ctx > 0) & (lo < ctx) & (hi == ctx) & (slot >= 0)
            q = rotate_and_write_kv(q_ptr, pos_ptr, cos_sin_ptr, k_cache_ptr, v_cache_ptr, q_w_ptr, k_w_ptr,
                                     norm_eps, seq, slot, kv_head, heads, row_ok, write, stride_qb, stride_cs,
                                     GROUP=GROUP, GROUP_PAD=GROUP_PAD, BLOCK_SIZE=BLOCK_SIZE, KV=KV, D=D,
                                     HEAD_MAJOR=HEAD_MAJOR, QK_NORM=QK_NORM)
        else:
            q = tl.load(q_ptr + seq * stride_qb + heads[:, None] * stride_qh + dims[None, :],
                        mask=row_ok[:, None] & dim_ok[None, :], other=0.0)  # [G, D]
        if FP32_DOT:
            q = q.to(tl.float32)
        m = tl.full([GROUP_PAD], float("-inf"), tl.float32)  # running max of the base-2 logits
        l_sum = tl.zeros([GROUP_PAD], tl.float32)
        acc = tl.zeros([GROUP_PAD, D_POW2], tl.float32)
        keys = tl.arange(0, BLOCK_N)
        for start in range(lo, hi, BLOCK_N):
            pos = start + keys  # [N]
            key_ok = pos < hi
            k, v = load_kv_tile(k_cache_ptr, v_cache_ptr, block_tables_ptr, seq * stride_bt, pos, key_ok, kv_head,
                                dims, dim_ok, BLOCK_SIZE, KV, D, HEAD_MAJOR)  # [N, D] each
            s = qk_dot(q, k, FP32_DOT)  # [G, N] float32
            s = tl.where(key_ok[None, :], s * qk_scale, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))  # finite: every iteration has a visible key
            p = tl.exp2(s - m_new[:, None])
            alpha = tl.exp2(m - m_new)
            l_sum = l_sum * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + pv_dot(p, v, FP32_DOT)  # [G, D]
            m = m_new
        out_mask = row_ok[:, None] & dim_ok[None, :]
        out_offsets = seq * stride_ob + heads[:, None] * stride_oh + dims[None, :]
        if SPLITS == 1:
            sink = tl.load(sinks_ptr + heads, mask=row_ok, other=0.0).to(tl.float32) * 1.4426950408889634
            m_all = tl.maximum(m, sink)
            scale_acc = tl.exp2(m - m_all)  # 0 where no key was visible (m = -inf)
            denom = l_sum * scale_acc + tl.exp2(sink - m_all)
            result = acc * (scale_acc / denom)[:, None]
            tl.store(out_ptr + out_offsets, result.to(out_ptr.dtype.element_ty), mask=out_mask)
            if FP8_OUT:  # the quantizer's bits of the stored rows (D: whole groups of 128, D == D_POW2)
                y = tl.reshape(result.to(out_ptr.dtype.element_ty).to(tl.float32), (GROUP_PAD * (D // 128), 128))
                bits, scales = quantize_groups(y, HW_ROUND)  # [G D/128, 128], [G D/128]
                tl.store(q8_ptr + out_offsets, tl.reshape(bits, (GROUP_PAD, D)), mask=out_mask)
                groups = tl.arange(0, D // 128)
                tl.store(s8_ptr + seq * (stride_ob // 128) + heads[:, None] * (D // 128) + groups[None, :],
                         tl.reshape(scales, (GROUP_PAD, D // 128)), mask=row_ok[:, None])
        else:
            part = (seq * (GROUP * KV) + heads) * SPLITS + split  # [G] row of (b, h, split)
            # every column, the padding ones too (zeros): the combine reads whole rows
            tl.store(part_acc_ptr + part[:, None] * D_POW2 + dims[None, :], acc, mask=row_ok[:, None])
            tl.store(part_ml_ptr + part * 2, m, mask=row_ok)
            tl.store(part_ml_ptr + part * 2 + 1, l_sum, mask=row_ok)

    @triton.jit
    def _decode_combine_kernel(part_acc_ptr, part_ml_ptr, sinks_ptr, out_ptr, stride_ob, stride_oh, q8_ptr, s8_ptr,
                               D: tl.constexpr, D_POW2: tl.constexpr, SPLITS: tl.constexpr, EARLY: tl.constexpr,
                               FP8_OUT: tl.constexpr, HW_ROUND: tl.constexpr, PDL: tl.constexpr):
        pdl_wait(PDL)
        pdl_trigger(EARLY)
        seq = tl.program_id(0)
        head = tl.program_id(1)
        num_heads = tl.num_programs(1)
        splits = tl.arange(0, SPLITS)
        dims = tl.arange(0, D_POW2)
        base = (seq * num_heads + head) * SPLITS
        m = tl.load(part_ml_ptr + (base + splits) * 2)  # [S]; -inf for a split with no key
        l_sum = tl.load(part_ml_ptr + (base + splits) * 2 + 1)
        acc = tl.load(part_acc_ptr + (base + splits)[:, None] * D_POW2 + dims[None, :])  # [S, D]
        sink = tl.load(sinks_ptr + head).to(tl.float32) * 1.4426950408889634
        m_all = tl.maximum(tl.max(m, axis=0), sink)
        w = tl.exp2(m - m_all)  # [S]
        denom = tl.sum(l_sum * w, axis=0) + tl.exp2(sink - m_all)
        result = tl.sum(acc * w[:, None], axis=0) / denom  # [D]
        tl.store(out_ptr + seq * stride_ob + head * stride_oh + dims, result.to(out_ptr.dtype.element_ty),
                 mask=dims < D)
        if FP8_OUT:  # the quantizer's bits of the stored row (D: whole groups of 128, D == D_POW2)
            bits, scales = quantize_groups(tl.reshape(result.to(out_ptr.dtype.element_ty).to(tl.float32),
                                                      (D // 128, 128)), HW_ROUND)
            tl.store(q8_ptr + seq * stride_ob + head * stride_oh + dims, tl.reshape(bits, (D,)))
            tl.store(s8_ptr + seq * (stride_ob // 128) + head * (D // 128) + tl.arange(0, D // 128), scales)
