"""Triton helpers the paged attention kernels share (decode_attention.py, prefill_attention.py): a tile of keys
gathered across cache blocks through a block table, and the two dots of an online-softmax step.

A tile is N consecutive positions of one sequence for one KV head: position p is row p % BLOCK_SIZE of block
block_tables[seq][p // BLOCK_SIZE] in a cache [num_blocks, BLOCK_SIZE, KV, D]. That cache is indexed the same way
in either of two memory layouts (`kv_cache_head_major`): slot-major, the tensor contiguous (a block's slot holds its
KV heads side by side: one head's 16 rows of a block lie KV * D elements apart), or head-major, a view
`.permute(0, 2, 1, 3)` of a contiguous [num_blocks, KV, BLOCK_SIZE, D] (one head's rows of a block are contiguous);
the kernels take the layout as HEAD_MAJOR and the torch references index the view. With FP32_DOT the dots run on
float32 operands in IEEE precision (float32 caches on the GPU, whose float32 dot is TF32 otherwise, and Triton's CPU
interpreter, whose bf16 dot is wrong); else on the cache's dtype (bf16 tensor cores).
"""

from __future__ import annotations

import functools

import torch

try:  # CPU installs without triton have no kernels to share this with
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None


def kv_cache_head_major(k_cache: torch.Tensor, v_cache: torch.Tensor) -> bool:
    """The memory layout of a layer's cache pair [num_blocks, block_size, KV, D] (see the module docstring): False for
    contiguous (slot-major) tensors, True for views of contiguous [num_blocks, KV, block_size, D] tensors; anything
    else (another stride pattern, K and V laid out differently) raises ValueError naming the strides. Every eager
    attention launch asks, so the answer is cached by shapes and strides (about 1 us a call)."""
    return _layout_of(tuple(k_cache.shape), k_cache.stride(), tuple(v_cache.shape), v_cache.stride())


@functools.lru_cache(maxsize=256)
def _layout_of(k_shape: tuple, k_strides: tuple, v_shape: tuple, v_strides: tuple) -> bool:
    if len(k_shape) != 4 or k_shape != v_shape:
        raise ValueError(f"KV cache: expected K and V of one shape [num_blocks, block_size, KV, D], got "
                         f"{k_shape} and {v_shape}")
    _, block_size, kv_heads, head_dim = k_shape
    slot_major = (block_size * kv_heads * head_dim, kv_heads * head_dim, head_dim, 1)
    head_major = (block_size * kv_heads * head_dim, head_dim, block_size * head_dim, 1)
    layouts = []
    for name, strides in (("K", k_strides), ("V", v_strides)):
        if _significant(k_shape, strides) == _significant(k_shape, slot_major):
            layouts.append(False)
        elif _significant(k_shape, strides) == _significant(k_shape, head_major):
            layouts.append(True)
        else:
            raise ValueError(f"KV cache {name}: strides {strides} for shape {k_shape}; expected {slot_major} "
                             f"(slot-major, contiguous) or {head_major} (head-major view)")
    if layouts[0] != layouts[1]:
        raise ValueError(f"KV cache: K and V in different layouts (strides {k_strides} and {v_strides})")
    return layouts[0]


def _significant(shape: tuple, strides: tuple) -> tuple:
    """Strides with those of size-1 dimensions left out (they never move an address)."""
    return tuple(s if n > 1 else None for n, s in zip(shape, strides))


if triton is not None:

    @triton.jit
    def kv_cache_offsets(block, row, kv_head, BLOCK_SIZE: tl.constexpr, KV: tl.constexpr, D: tl.constexpr,
                         HEAD_MAJOR: tl.constexpr):
        """Element offset of (block, row, kv_head, dim 0) in a layer's cache (int64 block): a block spans
        BLOCK_SIZE * KV * D elements in both layouts; within it rows lie KV * D apart and heads D (slot-major), or
        rows D apart and heads BLOCK_SIZE * D (head-major)."""
        if HEAD_MAJOR:
            offset = block * (BLOCK_SIZE * KV * D) + kv_head * (BLOCK_SIZE * D) + row * D
        else:
            offset = block * (BLOCK_SIZE * KV * D) + row * (KV * D) + kv_head * D
        return offset

    @triton.jit
    def load_kv_tile(k_cache_ptr, v_cache_ptr, block_tables_ptr, row_offset, pos, key_ok, kv_head, dims, dim_ok,
                     BLOCK_SIZE: tl.constexpr, KV: tl.constexpr, D: tl.constexpr, HEAD_MAJOR: tl.constexpr):
        """K and V [N, D] of positions `pos` [N] (masked by key_ok [N] and dim_ok [D]); row_offset: where the
        sequence's row of the block table starts."""
        block = tl.load(block_tables_ptr + row_offset + pos // BLOCK_SIZE, mask=key_ok, other=0)
        rows = kv_cache_offsets(block.to(tl.int64), pos % BLOCK_SIZE, kv_head, BLOCK_SIZE, KV, D, HEAD_MAJOR)  # [N]
        offsets = rows[:, None] + dims[None, :]  # [N, D]
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
