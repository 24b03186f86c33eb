"""Attention over the paged KV cache: the KV write and decode attention, each beside its torch reference.

Cache layout, per layer: k_cache, v_cache [num_blocks, block_size, KV, D]. Sequence b owns the blocks
listed in block_tables[b] ([B, max_blocks] int32; -1 where a sliding-window layer released the block):
its position p lives in block block_tables[b][p // block_size], row p % block_size. A token's slot is
block * block_size + row (`slot_mapping`).

- `write_kv_paged(k, v, k_cache, v_cache, slot_mapping)`: k, v [T, KV, D] into the cache at their slots;
  tokens whose slot is negative (padding of a CUDA-graph batch) write nothing.
- `paged_decode_attention(q, k_cache, v_cache, block_tables, context_lens, sinks, window, scale)`: q [B, H, D],
  one query per sequence at position context_lens[b] - 1, over keys j <= that position (and, with a window
  W > 0, j > position - W), GQA (head h reads KV head h // (H / KV)), and gpt-oss's per-head sink logit in
  the softmax denominator only: p_j = exp(s_j) / (sum_j' exp(s_j') + exp(sink_h)). Returns [B, H, D] in q's
  dtype. Every index it reads is on the device: the decode step can be captured in a CUDA graph.
- `paged_prefill_attention(q, k_cache, v_cache, block_tables, cu_query_lens, context_lens, sinks, window,
  scale)`: q [T, H, D] packs each sequence's new tokens (sequence b: rows cu_query_lens[b] ..
  cu_query_lens[b+1], the last ones of its context_lens[b] positions, already written to the cache), each
  query attending causally to the cache (prior context included: chunked prefill), with the same sinks,
  windows and GQA. Decode is the case of one new token per sequence.

The kernel runs one program per (sequence, KV head), with the H / KV query heads of the group together,
and an online softmax that starts from the sink: running max = sink, running sum = 1, accumulator = 0.
"""

from __future__ import annotations

import torch

try:  # CPU installs without triton keep the torch references
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["paged_decode_attention", "paged_decode_attention_ref", "paged_prefill_attention",
           "paged_prefill_attention_ref", "write_kv_paged", "write_kv_paged_ref"]


def write_kv_paged_ref(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                       slot_mapping: torch.Tensor) -> None:
    num_blocks, block_size = k_cache.shape[:2]
    keep = slot_mapping >= 0  # [T]
    slots = slot_mapping[keep]
    k_cache.view(num_blocks * block_size, *k_cache.shape[2:])[slots] = k[keep].to(k_cache.dtype)
    v_cache.view(num_blocks * block_size, *v_cache.shape[2:])[slots] = v[keep].to(v_cache.dtype)


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


def paged_prefill_attention_ref(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                                block_tables: torch.Tensor, cu_query_lens: torch.Tensor, context_lens: torch.Tensor,
                                sinks: torch.Tensor, window: int, scale: float) -> torch.Tensor:
    """Per sequence, in float32: its keys gathered from the block table, the definition applied per query."""
    num_heads, num_kv = q.shape[1], k_cache.shape[2]
    block_size = k_cache.shape[1]
    out = torch.empty_like(q)
    starts = cu_query_lens.tolist()
    for b, ctx in enumerate(context_lens.tolist()):
        rows = slice(starts[b], starts[b + 1])
        n = starts[b + 1] - starts[b]
        if n == 0:
            continue
        first = max(ctx - n - window + 1, 0) if window > 0 else 0  # keys before it are outside every query's window
        key_pos = torch.arange(first, ctx, device=q.device)  # [L]
        blocks = block_tables[b, key_pos // block_size].clamp(min=0).long()  # released (-1) blocks: masked below
        k = k_cache[blocks, key_pos % block_size].float().repeat_interleave(num_heads // num_kv, dim=1)  # [L, H, D]
        v = v_cache[blocks, key_pos % block_size].float().repeat_interleave(num_heads // num_kv, dim=1)
        q_pos = torch.arange(ctx - n, ctx, device=q.device)  # [n]
        visible = key_pos[None, :] <= q_pos[:, None]  # [n, L]
        if window > 0:
            visible &= key_pos[None, :] > q_pos[:, None] - window
        logits = torch.einsum("nhd,lhd->hnl", q[rows].float(), k) * scale  # [H, n, L]
        logits = logits.masked_fill(~visible[None], float("-inf"))
        combined = torch.cat([logits, sinks.float()[:, None, None].expand(-1, n, 1)], dim=2)
        probs = torch.softmax(combined, dim=2)[..., :-1]
        out[rows] = torch.einsum("hnl,lhd->nhd", probs, v).to(q.dtype)
    return out


def _require_triton() -> None:
    if triton is None:
        raise RuntimeError("the paged attention kernels need triton; the *_ref functions are the torch versions")


def write_kv_paged(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                   slot_mapping: torch.Tensor) -> None:
    """`write_kv_paged_ref` as one Triton launch (one program per token)."""
    _require_triton()
    num_tokens, num_kv, head_dim = k.shape
    if num_tokens == 0:
        return
    row = num_kv * head_dim
    _write_kv_kernel[(num_tokens,)](k, v, k_cache, v_cache, slot_mapping, k.stride(0), v.stride(0),
                                    ROW=row, ROW_POW2=triton.next_power_of_2(row))


def paged_decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_tables: torch.Tensor, context_lens: torch.Tensor, sinks: torch.Tensor,
                           window: int, scale: float) -> torch.Tensor:
    """`paged_decode_attention_ref` in one Triton launch: grid (B, KV heads)."""
    _require_triton()
    batch, num_heads, head_dim = q.shape
    num_blocks, block_size, num_kv, _ = k_cache.shape
    group = num_heads // num_kv
    out = torch.empty_like(q)
    if batch == 0:
        return out
    _decode_kernel[(batch, num_kv)](
        q, k_cache, v_cache, block_tables, context_lens, sinks, out, q.stride(0), q.stride(1),
        block_tables.stride(0), window, float(scale),
        GROUP=group, GROUP_POW2=triton.next_power_of_2(group), D=head_dim, D_POW2=triton.next_power_of_2(head_dim),
        BLOCK_SIZE=block_size, KV=num_kv)
    return out


def paged_prefill_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                            block_tables: torch.Tensor, cu_query_lens: torch.Tensor, context_lens: torch.Tensor,
                            sinks: torch.Tensor, window: int, scale: float, max_query_len: int,
                            block_q: int = 16) -> torch.Tensor:
    """`paged_prefill_attention_ref` in one Triton launch: grid (B, query tiles of block_q rows up to
    max_query_len, KV heads); each program takes its tile's queries of the group's H / KV heads together
    (block_q x group rows against each cache block, tensor cores on the GPU)."""
    _require_triton()
    num_tokens, num_heads, head_dim = q.shape
    num_blocks, block_size, num_kv, _ = k_cache.shape
    group = num_heads // num_kv
    out = torch.empty_like(q)
    batch = context_lens.shape[0]
    if num_tokens == 0 or batch == 0:
        return out
    group_pow2 = triton.next_power_of_2(group)
    block_q = max(block_q, 16 // group_pow2 if group_pow2 < 16 else 1)  # the dot needs >= 16 rows
    _prefill_kernel[(batch, triton.cdiv(max_query_len, block_q), num_kv)](
        q, k_cache, v_cache, block_tables, cu_query_lens, context_lens, sinks, out, q.stride(0), q.stride(1),
        block_tables.stride(0), window, float(scale),
        GROUP=group, GROUP_POW2=group_pow2, D=head_dim, D_POW2=max(16, triton.next_power_of_2(head_dim)),
        BLOCK_SIZE=block_size, KV=num_kv, BLOCK_Q=block_q, DOT_FP32=q.device.type == "cpu")
    return out


if triton is not None:

    @triton.jit
    def _write_kv_kernel(k_ptr, v_ptr, k_cache_ptr, v_cache_ptr, slot_ptr, stride_k, stride_v,
                         ROW: tl.constexpr, ROW_POW2: tl.constexpr):
        token = tl.program_id(0)
        slot = tl.load(slot_ptr + token).to(tl.int64)
        cols = tl.arange(0, ROW_POW2)
        ok = (cols < ROW) & (slot >= 0)  # a negative slot (padding) writes nothing
        k = tl.load(k_ptr + token * stride_k + cols, mask=ok)
        v = tl.load(v_ptr + token * stride_v + cols, mask=ok)
        tl.store(k_cache_ptr + slot * ROW + cols, k.to(k_cache_ptr.dtype.element_ty), mask=ok)
        tl.store(v_cache_ptr + slot * ROW + cols, v.to(v_cache_ptr.dtype.element_ty), mask=ok)

    @triton.jit
    def _decode_kernel(q_ptr, k_cache_ptr, v_cache_ptr, block_tables_ptr, context_lens_ptr, sinks_ptr, out_ptr,
                       stride_qb, stride_qh, stride_bt, window, scale,
                       GROUP: tl.constexpr, GROUP_POW2: tl.constexpr, D: tl.constexpr, D_POW2: tl.constexpr,
                       BLOCK_SIZE: tl.constexpr, KV: tl.constexpr):
        seq = tl.program_id(0)
        kv_head = tl.program_id(1)
        heads = kv_head * GROUP + tl.arange(0, GROUP_POW2)  # [G] query heads of this KV head
        head_ok = tl.arange(0, GROUP_POW2) < GROUP
        dims = tl.arange(0, D_POW2)
        dim_ok = dims < D
        q = tl.load(q_ptr + seq * stride_qb + heads[:, None] * stride_qh + dims[None, :],
                    mask=head_ok[:, None] & dim_ok[None, :], other=0.0).to(tl.float32)  # [G, D]
        ctx = tl.load(context_lens_ptr + seq)
        # the query at ctx - 1 sees keys > ctx - 1 - window (window <= 0: every key)
        first = tl.where(window > 0, tl.maximum(ctx - window, 0), 0)
        # online softmax seeded with the sink: its logit is in the max and the sum, its value is zero
        m = tl.load(sinks_ptr + heads, mask=head_ok, other=0.0).to(tl.float32)  # [G]
        denom = tl.full([GROUP_POW2], 1.0, tl.float32)
        acc = tl.zeros([GROUP_POW2, D_POW2], tl.float32)
        rows = tl.arange(0, BLOCK_SIZE)
        for blk in range(first // BLOCK_SIZE, tl.cdiv(ctx, BLOCK_SIZE)):
            physical = tl.load(block_tables_ptr + seq * stride_bt + blk).to(tl.int64)
            pos = blk * BLOCK_SIZE + rows  # [BS]
            key_ok = (pos < ctx) & (pos >= first)
            offsets = ((physical * BLOCK_SIZE + rows[:, None]) * KV + kv_head) * D + dims[None, :]  # [BS, D]
            k = tl.load(k_cache_ptr + offsets, mask=key_ok[:, None] & dim_ok[None, :], other=0.0).to(tl.float32)
            v = tl.load(v_cache_ptr + offsets, mask=key_ok[:, None] & dim_ok[None, :], other=0.0).to(tl.float32)
            logits = tl.sum(q[:, None, :] * k[None, :, :], axis=2) * scale  # [G, BS]
            logits = tl.where(key_ok[None, :], logits, float("-inf"))
            m_new = tl.maximum(m, tl.max(logits, axis=1))  # [G]
            p = tl.exp(logits - m_new[:, None])  # [G, BS]
            correction = tl.exp(m - m_new)
            denom = denom * correction + tl.sum(p, axis=1)
            acc = acc * correction[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)  # [G, D]
            m = m_new
        out = acc / denom[:, None]
        tl.store(out_ptr + seq * stride_qb + heads[:, None] * stride_qh + dims[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=head_ok[:, None] & dim_ok[None, :])

    @triton.jit
    def _prefill_kernel(q_ptr, k_cache_ptr, v_cache_ptr, block_tables_ptr, cu_q_ptr, context_lens_ptr, sinks_ptr,
                        out_ptr, stride_qt, stride_qh, stride_bt, window, scale,
                        GROUP: tl.constexpr, GROUP_POW2: tl.constexpr, D: tl.constexpr, D_POW2: tl.constexpr,
                        BLOCK_SIZE: tl.constexpr, KV: tl.constexpr, BLOCK_Q: tl.constexpr, DOT_FP32: tl.constexpr):
        seq = tl.program_id(0)
        q_tile = tl.program_id(1)
        kv_head = tl.program_id(2)
        q_start = tl.load(cu_q_ptr + seq)
        n = tl.load(cu_q_ptr + seq + 1) - q_start
        if q_tile * BLOCK_Q < n:
            ctx = tl.load(context_lens_ptr + seq)
            r = tl.arange(0, BLOCK_Q * GROUP_POW2)  # rows: query i = r // GROUP_POW2, head g = r % GROUP_POW2
            i = q_tile * BLOCK_Q + r // GROUP_POW2
            g = r % GROUP_POW2
            row_ok = (i < n) & (g < GROUP)
            head = kv_head * GROUP + g
            q_pos = ctx - n + i  # [R] absolute position of each row's query
            dims = tl.arange(0, D_POW2)
            dim_ok = dims < D
            q_offsets = (q_start + i)[:, None].to(tl.int64) * stride_qt + head[:, None] * stride_qh + dims[None, :]
            q = tl.load(q_ptr + q_offsets, mask=row_ok[:, None] & dim_ok[None, :], other=0.0)  # [R, D]
            if DOT_FP32:  # the CPU interpreter's bf16 dot is unreliable; products are exact in float32
                q = q.to(tl.float32)
            last_pos = ctx - n + tl.minimum(q_tile * BLOCK_Q + BLOCK_Q, n) - 1  # the tile's last query
            first_pos = tl.where(window > 0, tl.maximum(ctx - n + q_tile * BLOCK_Q - window + 1, 0), 0)
            m = tl.load(sinks_ptr + head, mask=row_ok, other=0.0).to(tl.float32)  # [R] seeded with the sink
            denom = tl.full([BLOCK_Q * GROUP_POW2], 1.0, tl.float32)
            acc = tl.zeros([BLOCK_Q * GROUP_POW2, D_POW2], tl.float32)
            keys = tl.arange(0, BLOCK_SIZE)
            for blk in range(first_pos // BLOCK_SIZE, last_pos // BLOCK_SIZE + 1):
                physical = tl.load(block_tables_ptr + seq * stride_bt + blk).to(tl.int64)
                k_pos = blk * BLOCK_SIZE + keys  # [BS]
                offsets = ((physical * BLOCK_SIZE + keys[:, None]) * KV + kv_head) * D + dims[None, :]  # [BS, D]
                k_ok = (k_pos < ctx)[:, None] & dim_ok[None, :]
                k = tl.load(k_cache_ptr + offsets, mask=k_ok, other=0.0)
                v = tl.load(v_cache_ptr + offsets, mask=k_ok, other=0.0)
                if DOT_FP32:
                    k = k.to(tl.float32)
                    v = v.to(tl.float32)
                logits = tl.dot(q, tl.trans(k)) * scale  # [R, BS]
                visible = (k_pos[None, :] <= q_pos[:, None]) & (k_pos[None, :] < ctx)
                visible &= (window <= 0) | (k_pos[None, :] > q_pos[:, None] - window)
                logits = tl.where(visible, logits, float("-inf"))
                m_new = tl.maximum(m, tl.max(logits, axis=1))
                p = tl.exp(logits - m_new[:, None])
                correction = tl.exp(m - m_new)
                denom = denom * correction + tl.sum(p, axis=1)
                acc = acc * correction[:, None] + tl.dot(p.to(v.dtype), v)
                m = m_new
            out = acc / denom[:, None]
            out_offsets = (q_start + i)[:, None].to(tl.int64) * stride_qt + head[:, None] * stride_qh + dims[None, :]
            tl.store(out_ptr + out_offsets, out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & dim_ok[None, :])
