"""RoPE fused with the paged KV-cache write: `rotary_write_kv` (Triton) beside `rotary_write_kv_ref` (torch),
same signature.

    q_rot = rope(q);  k_cache[slot_t], v_cache[slot_t] = rope(k_t), v_t   (tokens with slot_t < 0: no write)

qkv [T, (H + 2 KV) D] is the fused projection's output: q's H heads, then k's KV heads, then v's (KV and D are
the cache's, H follows). `cos_sin_cache` [P, D] float32 holds per position cos (first D/2 columns) and sin (last D/2), already scaled
(YaRN's attention factor); `positions` [T] index it. The rotation is NeoX's half split:
    x' = [x1 * cos - x2 * sin, x2 * cos + x1 * sin],  x = [x1, x2].
cos and sin are rounded to the activations' dtype first, as the eager path does; the kernel then computes each
output in float32 and rounds once. One program per token: q's heads, k's and v's, in one launch instead of
the eager path's ~15 (rotations, concatenations, the cache write). `rotate_and_write_kv` is the same arithmetic
inside the fused decode attention's programs (kernels/decode_attention.py), a sequence's KV head at a time.
"""

from __future__ import annotations

import torch

from quickmoe.kernels.paged_kv_tile import kv_cache_head_major
from quickmoe.kernels.pdl import pdl_kwargs

try:  # CPU installs without triton keep the torch reference
    import triton
    import triton.language as tl

    from quickmoe.kernels.paged_kv_tile import kv_cache_offsets
    from quickmoe.kernels.pdl import pdl_wait
    from quickmoe.kernels.rms_norm import head_rms_norm_halves
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["apply_rotary_ref", "rotary_write_kv", "rotary_write_kv_ref", "split_qkv"]


def apply_rotary_ref(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [T, heads, D]; cos/sin [T, D/2] in x's dtype. The first half pairs with the second half (NeoX)."""
    x1, x2 = x.chunk(2, dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def split_qkv(qkv: torch.Tensor, num_kv: int, head_dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """qkv [T, (H + 2 KV) D] -> q [T, H, D], k [T, KV, D], v [T, KV, D] (views)."""
    num_tokens = qkv.shape[0]
    num_heads = qkv.shape[1] // head_dim - 2 * num_kv
    q, k, v = qkv.split([num_heads * head_dim, num_kv * head_dim, num_kv * head_dim], dim=-1)
    return (q.reshape(num_tokens, num_heads, head_dim), k.reshape(num_tokens, num_kv, head_dim),
            v.reshape(num_tokens, num_kv, head_dim))


def rotary_write_kv_ref(qkv: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
                        k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor) -> torch.Tensor:
    """Returns q rotated ([T, H, D], contiguous); writes rotated k and v into the caches at slot_mapping."""
    q, k, v = split_qkv(qkv, k_cache.shape[2], k_cache.shape[3])
    half = q.shape[-1] // 2
    cos_sin = cos_sin_cache[positions.long()].to(q.dtype)  # [T, D]
    cos, sin = cos_sin[:, :half], cos_sin[:, half:]
    q_rot = apply_rotary_ref(q, cos, sin)
    k_rot = apply_rotary_ref(k, cos, sin)
    block_size = k_cache.shape[1]
    keep = slot_mapping >= 0  # [T]
    slots = slot_mapping[keep].long()
    blocks, rows = slots // block_size, slots % block_size  # indexing, not a flat view: head-major caches are views
    k_cache[blocks, rows] = k_rot[keep].to(k_cache.dtype)
    v_cache[blocks, rows] = v[keep].to(v_cache.dtype)
    return q_rot


def rotary_write_kv(qkv: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
                    k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor) -> torch.Tensor:
    """`rotary_write_kv_ref` in one launch (grid: tokens)."""
    if triton is None:
        raise RuntimeError("rotary_write_kv needs triton; rotary_write_kv_ref is the torch version")
    block_size, num_kv, head_dim = k_cache.shape[1:]
    head_major = kv_cache_head_major(k_cache, v_cache)
    q, k, v = split_qkv(qkv, num_kv, head_dim)  # strided views
    num_tokens, num_heads, _ = q.shape
    assert head_dim % 2 == 0 and qkv.stride(1) == 1
    q_rot = torch.empty(num_tokens, num_heads, head_dim, dtype=q.dtype, device=q.device)
    if num_tokens:
        half = head_dim // 2
        _rotary_write_kv_kernel[(num_tokens,)](
            q, k, v, positions, cos_sin_cache, k_cache, v_cache, slot_mapping, q_rot,
            q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), cos_sin_cache.stride(0),
            H=num_heads, H_POW2=triton.next_power_of_2(num_heads), KV=num_kv, KV_POW2=triton.next_power_of_2(num_kv),
            BLOCK_SIZE=block_size, HEAD_MAJOR=head_major, HALF=half, HALF_POW2=triton.next_power_of_2(half),
            num_warps=4, **pdl_kwargs(qkv.device))
    return q_rot


if triton is not None:

    @triton.jit
    def _rotate(x_ptr, row_offsets, row_ok, cols, col_ok, cos, sin, HALF: tl.constexpr):
        """Loads rows [R, D] as two halves and returns them rotated, float32."""
        mask = row_ok[:, None] & col_ok[None, :]
        x1 = tl.load(x_ptr + row_offsets[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(x_ptr + row_offsets[:, None] + HALF + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        return x1 * cos[None, :] - x2 * sin[None, :], x2 * cos[None, :] + x1 * sin[None, :]

    @triton.jit
    def _rotary_write_kv_kernel(q_ptr, k_ptr, v_ptr, pos_ptr, cos_sin_ptr, k_cache_ptr, v_cache_ptr, slot_ptr,
                                q_out_ptr, stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
                                stride_cs, H: tl.constexpr, H_POW2: tl.constexpr, KV: tl.constexpr,
                                KV_POW2: tl.constexpr, BLOCK_SIZE: tl.constexpr, HEAD_MAJOR: tl.constexpr,
                                HALF: tl.constexpr, HALF_POW2: tl.constexpr,
                                PDL: tl.constexpr):
        pdl_wait(PDL)
        token = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, HALF_POW2)
        col_ok = cols < HALF
        pos = tl.load(pos_ptr + token).to(tl.int64)
        # cos and sin rounded to the activations' dtype, as the eager rotation uses them
        cos = tl.load(cos_sin_ptr + pos * stride_cs + cols, mask=col_ok, other=0.0)
        sin = tl.load(cos_sin_ptr + pos * stride_cs + HALF + cols, mask=col_ok, other=0.0)
        cos = cos.to(q_out_ptr.dtype.element_ty).to(tl.float32)
        sin = sin.to(q_out_ptr.dtype.element_ty).to(tl.float32)

        heads = tl.arange(0, H_POW2)
        head_ok = heads < H
        q1, q2 = _rotate(q_ptr, token * stride_qt + heads * stride_qh, head_ok, cols, col_ok, cos, sin, HALF)
        out_rows = (token * H + heads) * (2 * HALF)
        mask = head_ok[:, None] & col_ok[None, :]
        tl.store(q_out_ptr + out_rows[:, None] + cols[None, :], q1.to(q_out_ptr.dtype.element_ty), mask=mask)
        tl.store(q_out_ptr + out_rows[:, None] + HALF + cols[None, :], q2.to(q_out_ptr.dtype.element_ty), mask=mask)

        slot = tl.load(slot_ptr + token).to(tl.int64)
        kv_heads = tl.arange(0, KV_POW2)
        kv_ok = (kv_heads < KV) & (slot >= 0)  # a negative slot (padding) writes nothing
        k1, k2 = _rotate(k_ptr, token * stride_kt + kv_heads * stride_kh, kv_ok, cols, col_ok, cos, sin, HALF)
        cache_rows = kv_cache_offsets(slot // BLOCK_SIZE, slot % BLOCK_SIZE, kv_heads, BLOCK_SIZE, KV, 2 * HALF,
                                      HEAD_MAJOR)  # [KV_POW2]
        mask = kv_ok[:, None] & col_ok[None, :]
        tl.store(k_cache_ptr + cache_rows[:, None] + cols[None, :], k1.to(k_cache_ptr.dtype.element_ty), mask=mask)
        tl.store(k_cache_ptr + cache_rows[:, None] + HALF + cols[None, :], k2.to(k_cache_ptr.dtype.element_ty),
                 mask=mask)
        v_rows = token * stride_vt + kv_heads * stride_vh
        for part in tl.static_range(2):
            v = tl.load(v_ptr + v_rows[:, None] + part * HALF + cols[None, :], mask=mask, other=0.0)
            tl.store(v_cache_ptr + cache_rows[:, None] + part * HALF + cols[None, :],
                     v.to(v_cache_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def rotate_and_write_kv(qkv_ptr, pos_ptr, cos_sin_ptr, k_cache_ptr, v_cache_ptr, q_w_ptr, k_w_ptr, norm_eps, seq,
                             slot, kv_head, heads, row_ok, write, stride_qb, stride_cs, GROUP: tl.constexpr,
                             GROUP_PAD: tl.constexpr, BLOCK_SIZE: tl.constexpr, KV: tl.constexpr, D: tl.constexpr,
                             HEAD_MAJOR: tl.constexpr, QK_NORM: tl.constexpr):
        """The fused decode attention's start (kernels/decode_attention.py): q's rows `heads` rotated [GROUP_PAD, D]
        in qkv's dtype (Qwen3's per-head q/k RMSNorm first with QK_NORM); when `write`, this KV
        head's new k (rotated) and v stored at the sequence's slot. The new k and v are loaded beside q whether
        written or not (a few hundred bytes from L2), so the writing program, the one the step waits for, does not
        wait for them after q's rotation."""
        HALF: tl.constexpr = D // 2
        dtype = qkv_ptr.dtype.element_ty
        cols = tl.arange(0, HALF)
        dims = tl.arange(0, D)
        pos = tl.load(pos_ptr + seq).to(tl.int64)
        row = qkv_ptr + seq.to(tl.int64) * stride_qb
        offsets = heads[:, None] * D + cols[None, :]  # [G, HALF]
        q1 = tl.load(row + offsets, mask=row_ok[:, None], other=0.0).to(tl.float32)
        q2 = tl.load(row + HALF + offsets, mask=row_ok[:, None], other=0.0).to(tl.float32)
        k = row + (GROUP * KV + kv_head) * D  # this KV head's k in qkv, then its v KV heads later
        k1 = tl.load(k + cols).to(tl.float32)
        k2 = tl.load(k + HALF + cols).to(tl.float32)
        v = tl.load(k + KV * D + dims)
        if QK_NORM:  # Qwen3's per-head RMSNorm of q and k, before RoPE (padded q rows are zeros: finite, unused)
            q1, q2 = head_rms_norm_halves(q1, q2, q_w_ptr, norm_eps, HALF, dtype)
            k1, k2 = head_rms_norm_halves(k1[None, :], k2[None, :], k_w_ptr, norm_eps, HALF, dtype)
            k1 = tl.reshape(k1, (HALF,))
            k2 = tl.reshape(k2, (HALF,))
        # cos and sin rounded to the activations' dtype, as `rotary_write_kv` uses them
        cos = tl.load(cos_sin_ptr + pos * stride_cs + cols).to(dtype).to(tl.float32)
        sin = tl.load(cos_sin_ptr + pos * stride_cs + HALF + cols).to(dtype).to(tl.float32)
        q1, q2 = q1 * cos[None, :] - q2 * sin[None, :], q2 * cos[None, :] + q1 * sin[None, :]
        q = tl.reshape(tl.permute(tl.join(q1.to(dtype), q2.to(dtype)), (0, 2, 1)), (GROUP_PAD, D))  # [G, D] halves
        # predicated stores, not a branch: the compiler would sink k's and v's loads into it
        cache = kv_cache_offsets(tl.maximum(slot, 0) // BLOCK_SIZE, tl.maximum(slot, 0) % BLOCK_SIZE, kv_head,
                                 BLOCK_SIZE, KV, D, HEAD_MAJOR)
        tl.store(k_cache_ptr + cache + cols, (k1 * cos - k2 * sin).to(k_cache_ptr.dtype.element_ty), mask=write)
        tl.store(k_cache_ptr + cache + HALF + cols, (k2 * cos + k1 * sin).to(k_cache_ptr.dtype.element_ty),
                 mask=write)
        tl.store(v_cache_ptr + cache + dims, v.to(v_cache_ptr.dtype.element_ty), mask=write)
        tl.debug_barrier()  # every thread's cache stores land before any thread reads the span
        return q
