"""Paged decode attention (one new query per sequence), split over the context: `paged_decode_attention`
(Triton) beside `paged_decode_attention_ref` (torch), same signature.

q [B, H, D] holds each sequence's query at position context_lens[b] - 1; it attends to the keys j <= that
position (with a window W > 0 only j > position - W) of its paged cache, GQA (head h reads KV head
h // (H / KV)), and gpt-oss's per-head sink logit joins the softmax denominator only:
    out_h = sum_j exp(s_hj) v_j / (sum_j exp(s_hj) + exp(sink_h)),   s_hj = scale * q_h . k_j.
Cache layout per layer: k_cache, v_cache [num_blocks, block_size, KV, D]; position p of sequence b is row
p % block_size of block block_tables[b][p // block_size] (-1 where a sliding window released it).

The kernel (flash-decoding): grid (B, KV heads, splits). A program takes the GROUP = H / KV query heads of
its KV head together (padded to 16 rows: one tensor-core tile, `tl.dot`) and one contiguous span of the
visible keys, BLOCK_N keys per iteration gathered across cache blocks through the block table; it keeps an
online softmax (running max m, sum l, accumulator acc, base-2 exponentials). With one split it finishes the
softmax itself (sink included); with several, each writes (m, l, acc) and `_decode_combine_kernel` merges them:
    M = max(max_s m_s, sink),  out = sum_s 2^(m_s - M) acc_s / (sum_s 2^(m_s - M) l_s + 2^(sink - M)).
The number of splits depends on B only (a CUDA graph fixes it at capture); each program finds its span from
context_lens on the device, so nothing is read on the host. A sliding-window layer's spans cover only the
window: released blocks are never read.
"""

from __future__ import annotations

import functools

import torch

from quickmoe.kernels.pdl import pdl_kwargs

try:  # CPU installs without triton keep the torch reference
    import triton
    import triton.language as tl

    from quickmoe.kernels.pdl import pdl_wait
except ImportError:  # pragma: no cover
    triton = None
else:
    from quickmoe.kernels.paged_kv_tile import load_kv_tile, pv_dot, qk_dot

__all__ = ["decode_num_splits", "paged_decode_attention", "paged_decode_attention_ref"]

LOG2E = 1.4426950408889634


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


@functools.lru_cache(maxsize=8)
def _num_sms(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def decode_num_splits(batch: int, num_kv_heads: int, device: torch.device, max_splits: int = 32) -> int:
    """Splits of each sequence's context: enough programs for about two per multiprocessor, a power of two
    (a function of the batch size only, so a CUDA graph captured for a batch size keeps it)."""
    want = -(-2 * _num_sms(device) // max(batch * num_kv_heads, 1))
    return min(max_splits, triton.next_power_of_2(want)) if want > 1 else 1


def paged_decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_tables: torch.Tensor, context_lens: torch.Tensor, sinks: torch.Tensor,
                           window: int, scale: float, num_splits: int | None = None) -> torch.Tensor:
    """`paged_decode_attention_ref` in one or two Triton launches (see the module docstring). `num_splits`
    None picks `decode_num_splits(B)`."""
    if triton is None:
        raise RuntimeError("paged_decode_attention needs triton; paged_decode_attention_ref is the torch version")
    batch, num_heads, head_dim = q.shape
    _, block_size, num_kv, _ = k_cache.shape
    group = num_heads // num_kv
    out = torch.empty_like(q)
    if batch == 0:
        return out
    splits = num_splits if num_splits is not None else decode_num_splits(batch, num_kv, q.device)
    fp32_dot = q.device.type == "cpu" or k_cache.dtype == torch.float32  # the interpreter's bf16 dot is wrong
    d_pow2 = max(16, triton.next_power_of_2(head_dim))
    block_n = 64 if d_pow2 <= 128 else 32
    if splits == 1:
        partial_acc = partial_ml = out  # unused: the program normalises and writes `out` itself
    else:
        partial_acc = torch.empty(batch, num_heads, splits, d_pow2, dtype=torch.float32, device=q.device)
        partial_ml = torch.empty(batch, num_heads, splits, 2, dtype=torch.float32, device=q.device)
    _decode_split_kernel[(batch, num_kv, splits)](
        q, k_cache, v_cache, block_tables, context_lens, sinks, out, partial_acc, partial_ml,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1), block_tables.stride(0), window,
        float(scale) * LOG2E,
        GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)), D=head_dim, D_POW2=d_pow2,
        BLOCK_SIZE=block_size, KV=num_kv, BLOCK_N=block_n, SPLITS=splits, FP32_DOT=fp32_dot,
        num_warps=4, num_stages=2, **pdl_kwargs(q.device))
    if splits > 1:
        _decode_combine_kernel[(batch, num_heads)](partial_acc, partial_ml, sinks, out, out.stride(0), out.stride(1),
                                           D=head_dim, D_POW2=d_pow2, SPLITS=splits, num_warps=1,
                                           **pdl_kwargs(q.device))
    return out


if triton is not None:

    @triton.jit
    def _decode_split_kernel(q_ptr, k_cache_ptr, v_cache_ptr, block_tables_ptr, context_lens_ptr, sinks_ptr,
                             out_ptr, part_acc_ptr, part_ml_ptr, stride_qb, stride_qh, stride_ob, stride_oh,
                             stride_bt, window, qk_scale,
                             GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, D: tl.constexpr, D_POW2: tl.constexpr,
                             BLOCK_SIZE: tl.constexpr, KV: tl.constexpr, BLOCK_N: tl.constexpr,
                             SPLITS: tl.constexpr, FP32_DOT: tl.constexpr, PDL: tl.constexpr):
        pdl_wait(PDL)
        seq = tl.program_id(0)
        kv_head = tl.program_id(1)
        split = tl.program_id(2)
        rows = tl.arange(0, GROUP_PAD)  # query heads of this KV head, padded to a tensor-core tile
        row_ok = rows < GROUP
        heads = kv_head * GROUP + rows
        dims = tl.arange(0, D_POW2)
        dim_ok = dims < D
        ctx = tl.load(context_lens_ptr + seq)
        first = tl.where(window > 0, tl.maximum(ctx - window, 0), 0)  # the first visible key
        per_split = tl.cdiv(tl.cdiv(ctx - first, SPLITS), BLOCK_N) * BLOCK_N
        lo = first + split * per_split
        hi = tl.minimum(lo + per_split, ctx)
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
                                dims, dim_ok, BLOCK_SIZE, KV, D)  # [N, D] each
            s = qk_dot(q, k, FP32_DOT)  # [G, N] float32
            s = tl.where(key_ok[None, :], s * qk_scale, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))  # finite: every iteration has a visible key
            p = tl.exp2(s - m_new[:, None])
            alpha = tl.exp2(m - m_new)
            l_sum = l_sum * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + pv_dot(p, v, FP32_DOT)  # [G, D]
            m = m_new
        out_mask = row_ok[:, None] & dim_ok[None, :]
        if SPLITS == 1:
            sink = tl.load(sinks_ptr + heads, mask=row_ok, other=0.0).to(tl.float32) * 1.4426950408889634
            m_all = tl.maximum(m, sink)
            scale_acc = tl.exp2(m - m_all)  # 0 where no key was visible (m = -inf)
            denom = l_sum * scale_acc + tl.exp2(sink - m_all)
            result = acc * (scale_acc / denom)[:, None]
            tl.store(out_ptr + seq * stride_ob + heads[:, None] * stride_oh + dims[None, :],
                     result.to(out_ptr.dtype.element_ty), mask=out_mask)
        else:
            part = (seq * (GROUP * KV) + heads) * SPLITS + split  # [G] row of (b, h, split)
            # every column, the padding ones too (zeros): the combine reads whole rows
            tl.store(part_acc_ptr + part[:, None] * D_POW2 + dims[None, :], acc, mask=row_ok[:, None])
            tl.store(part_ml_ptr + part * 2, m, mask=row_ok)
            tl.store(part_ml_ptr + part * 2 + 1, l_sum, mask=row_ok)

    @triton.jit
    def _decode_combine_kernel(part_acc_ptr, part_ml_ptr, sinks_ptr, out_ptr, stride_ob, stride_oh,
                        D: tl.constexpr, D_POW2: tl.constexpr, SPLITS: tl.constexpr, PDL: tl.constexpr):
        pdl_wait(PDL)
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
