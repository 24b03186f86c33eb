"""Triton helpers the paged attention kernels share (decode_attention.py, prefill_attention.py): a tile of keys
gathered across cache blocks through a block table, and the two dots of an online-softmax step.

A tile is N consecutive positions of one sequence for one KV head: position p is row p % BLOCK_SIZE of block
block_tables[seq][p // BLOCK_SIZE] in a cache [num_blocks, BLOCK_SIZE, KV, D]. With FP32_DOT the dots run on
float32 operands in IEEE precision (float32 caches on the GPU, whose float32 dot is TF32 otherwise, and Triton's CPU
interpreter, whose bf16 dot is wrong); else on the cache's dtype (bf16 tensor cores).
"""

from __future__ import annotations

try:  # CPU installs without triton have no kernels to share this with
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

if triton is not None:

    @triton.jit
    def load_kv_tile(k_cache_ptr, v_cache_ptr, block_tables_ptr, row_offset, pos, key_ok, kv_head, dims, dim_ok,
                     BLOCK_SIZE: tl.constexpr, KV: tl.constexpr, D: tl.constexpr):
        """K and V [N, D] of positions `pos` [N] (masked by key_ok [N] and dim_ok [D]); row_offset: where the
        sequence's row of the block table starts."""
        block = tl.load(block_tables_ptr + row_offset + pos // BLOCK_SIZE, mask=key_ok, other=0)
        slot = block.to(tl.int64) * BLOCK_SIZE + pos % BLOCK_SIZE  # [N]
        offsets = (slot[:, None] * KV + kv_head) * D + dims[None, :]  # [N, D]
        kv_mask = key_ok[:, None] & dim_ok[None, :]
        k = tl.load(k_cache_ptr + offsets, mask=kv_mask, other=0.0)
        v = tl.load(v_cache_ptr + offsets, mask=kv_mask, other=0.0)
        return k, v

    @triton.jit
    def qk_dot(q, k, FP32_DOT: tl.constexpr):
        """q [R, D] x k [N, D]^T -> [R, N] float32 (q already float32 with FP32_DOT)."""
        if FP32_DOT:
            s = tl.dot(q, tl.trans(k.to(tl.float32)), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        return s

    @triton.jit
    def pv_dot(p, v, FP32_DOT: tl.constexpr):
        """p [R, N] float32 x v [N, D] -> [R, D] float32 (p rounded to v's dtype on the tensor-core path)."""
        if FP32_DOT:
            out = tl.dot(p, v.to(tl.float32), input_precision="ieee")
        else:
            out = tl.dot(p.to(v.dtype), v)
        return out
