"""What bounds the batch-256 MXFP4 GEMM 1, and would Gluon tiles lift it? (issue 15: in `bench generate`'s batch-256
decode step the MoE is ~74% of the kernels, its layer at ~33% of HBM).

The engine's Triton GEMM 1 tile at T = 256 (64 assignment rows, 64 columns' gate and up rows in one dot, K steps
of 64; `sass_probe.py --block-m 64 --block-n 64 --block-k 64 --one-dot`) waits for its copies, decodes the MXFP4
weights into shared memory, issues one wgmma group and waits for it (`WARPGROUP.DEPBAR.LE gsb0, 0x0`) before
decoding the next step. Two Gluon (`triton.experimental.gluon`, Triton 3.6) tiles of the same GEMM, on experts
whose tokens lie contiguously (tok rows an expert, as balanced routing of 8 x tok tokens over 32 experts, top 4,
gives), each checked against the dequantized weights in float32 and timed in CUDA graphs beside the engine's
`moe_gemm1_swiglu` at its tuned config on the same experts with balanced routing (which also gathers its rows and
applies bias and SwiGLU):

- shared operand (`gluon_mxfp4_gemm`): the Triton tile's work with the decoded weights in two shared buffers, so
  that step j + 1 is decoded while step j's wgmma runs (`warpgroup_mma_wait(num_outstanding=1)`); activation and
  packed weight tiles by TMA into a ring of STAGES buffers; the scales one step ahead in registers.
- register operand (`gluon_mxfp4_frag_gemm`): the weights are wgmma's left operand straight from the decode's
  registers (128 weight rows, tok tokens as the right operand from shared memory), so no shared memory holds
  them. `fragment_words` re-lays the packed weights so that each thread's 4-byte word holds exactly the 8 values
  its mma fragment needs of one 16-column k block, in the engine's mma-pair bit order (one shift and one mask a
  pair, as `MXFP4_PAIRS_TO_BF16_PTX_TEXT`); words are loaded straight from global memory two steps ahead. Two
  ways to bring the decode's outputs into the fragment's register order: "halves" (8 bf16 outputs joined in
  order) and "copies" (one call over 8 register copies of the word, whose single output holds the 4 bf16x2
  registers in order). Waiting for all but the last wgmma (`outstanding=1`) gives wrong results from the third K
  step on: the operand registers of the wgmma still in flight are reused by the next step's decode (the waits'
  `deps` keep the tensor alive, not the registers the wgmma reads), so the committed figures wait for each step.
  `factors=fragment_factors(scales)`: the "halves" decode reads each word's two block factors as one bf16 pair,
  spread by two byte permutes, instead of two scale bytes (two loads, their zero extension and a multiply-add each).

    PYTHONPATH=src python3 scripts/probes/gluon_mxfp4_probe.py [--tok 8,16,32,64] [--json PATH]   # on the GPU
    PYTHONPATH=src python3 scripts/probes/gluon_mxfp4_probe.py --profile-once   # under ncu --profile-from-start off
    PYTHONPATH=src python3 scripts/probes/gluon_mxfp4_probe.py --compile-only   # sm_90 SASS stats, no GPU

A probe, not a benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import torch

os.environ.pop("TRITON_INTERPRET", None)

import triton  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import (  # noqa: E402
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402

from quickmoe.kernels.moe_tiles import MXFP4_PAIRS_ACC_SCALE, MXFP4_PAIRS_TO_BF16_PTX_TEXT  # noqa: E402
from quickmoe.kernels.moe_register_k_loop import dup3 as _dup3  # noqa: E402 - the engine's K loop uses the same helper

PTX = gl.constexpr(MXFP4_PAIRS_TO_BF16_PTX_TEXT)
ACC_SCALE = gl.constexpr(MXFP4_PAIRS_ACC_SCALE)
BM, BN, BK = 64, 128, 64
CONFIGS = [(4, 3), (4, 4), (4, 2)]  # warps, stages


@gluon.jit
def _issue(j, x_desc, c_desc, x_smem, c_smem, ready, x_row, w_row, pred, STAGES: gl.constexpr):
    """TMA copies of step j's activation tile [BM, BK] and packed weight tile [BN, BK/2] into stage j % STAGES."""
    s = j % STAGES
    mbarrier.expect(ready.index(s), x_desc.block_type.nbytes + c_desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(x_desc, [x_row, j * 64], ready.index(s), x_smem.index(s), pred=pred)
    tma.async_copy_global_to_shared(c_desc, [w_row, j * 32], ready.index(s), c_smem.index(s), pred=pred)


@gluon.jit
def _step(j, acc, s_next, use_acc, x_desc, c_desc, x_smem, c_smem, w_smem, ready, x_row, w_row, s_ptr, s_off, rows,
          N, nk, L2: gl.constexpr, L3: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr):
    """K step j: decode its weights into buffer j % 2 while step j - 1's wgmma runs, issue its wgmma, wait for step
    j - 1's, refill that step's stage. -> (acc, the next step's scale bytes)."""
    s = j % STAGES
    sc = s_next
    s_next = gl.load(s_ptr + s_off + (j + 1) * (BK // 32) * N, mask=(j + 1 < nk) & (rows[:, None] >= 0), other=0)
    mbarrier.wait(ready.index(s), (j // STAGES) & 1)
    codes = gl.convert_layout(gl.reshape(c_smem.index(s).load(L2), (BN, BK // 8, 4)), L3)  # [BN, BK/8, 4]
    scale = gl.broadcast(gl.expand_dims(sc.to(gl.int32), 2), codes)[0]  # [BN, BK/8, 4]: each byte's block
    low, high = gl.inline_asm_elementwise(PTX, "=r,=r,=r,=r,r,r,r,r,r", [codes, scale],
                                          dtype=(gl.bfloat16, gl.bfloat16), is_pure=True, pack=4)
    # low: columns 8g + 0..3 of word g, high: 8g + 4..7
    value = gl.reshape(gl.permute(gl.join(low, high), (0, 1, 3, 2)), (BN, BK))  # [BN, BK]
    b = j % 2
    w_smem.index(b).store(value)
    fence_async_shared()
    gl.thread_barrier()
    acc = warpgroup_mma(x_smem.index(s), w_smem.index(b).permute((1, 0)), acc, use_acc=use_acc, is_async=True)
    acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))  # step j - 1 done: its stage and buffer free
    _issue(j - 1 + STAGES, x_desc, c_desc, x_smem, c_smem, ready, x_row, w_row, (j >= 1) & (j - 1 + STAGES < nk),
           STAGES)
    return acc, s_next


@gluon.jit
def _gluon_mxfp4_kernel(x_desc, c_desc, s_ptr, out_ptr, N, K, stride_out, TOK: gl.constexpr, BM: gl.constexpr,
                        BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr, num_warps: gl.constexpr):
    num_n = N // BN
    pid = gl.program_id(0)
    e = pid // num_n
    n0 = (pid % num_n) * BN
    x_row = e * TOK
    w_row = e * N + n0
    nk = K // BK
    x_smem = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BM, BK], x_desc.layout)
    c_smem = gl.allocate_shared_memory(gl.uint8, [STAGES, BN, BK // 2], c_desc.layout)
    w_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BN, BK], gl.bfloat16)
    w_smem = gl.allocate_shared_memory(gl.bfloat16, [2, BN, BK], w_layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
    for i in gl.static_range(STAGES):
        _issue(i, x_desc, c_desc, x_smem, c_smem, ready, x_row, w_row, True, STAGES)
    # packed bytes [BN, BK/2]: a thread holds whole 4-byte words (8 codes of 8 adjacent columns)
    L2: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [num_warps, 1], [1, 0])
    L3: gl.constexpr = gl.BlockedLayout([1, 1, 4], [4, 8, 1], [num_warps, 1, 1], [2, 1, 0])
    SL: gl.constexpr = gl.SliceLayout(2, L3)
    rows = gl.arange(0, BN, layout=gl.SliceLayout(1, SL))
    words = gl.arange(0, BK // 8, layout=gl.SliceLayout(0, SL))
    s_off = e * (K // 32) * N + n0 + rows[:, None] + (words[None, :] // 4) * N  # [BN, BK/8]: step 0's scale bytes
    s_next = gl.load(s_ptr + s_off)
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BN, 16])
    acc = gl.zeros((BM, BN), dtype=gl.float32, layout=mma_layout)
    # step 0 peeled: the loop below runs at least once more and never redefines the accumulator's registers
    # (ptxas serializes every wgmma of a pipeline stage in which other instructions write them)
    acc, s_next = _step(0, acc, s_next, False, x_desc, c_desc, x_smem, c_smem, w_smem, ready, x_row, w_row, s_ptr,
                        s_off, rows, N, nk, L2, L3, BN, BK, STAGES)
    for j in range(1, nk):
        acc, s_next = _step(j, acc, s_next, True, x_desc, c_desc, x_smem, c_smem, w_smem, ready, x_row, w_row, s_ptr,
                            s_off, rows, N, nk, L2, L3, BN, BK, STAGES)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))
    out_rows = gl.arange(0, BM, layout=gl.SliceLayout(1, mma_layout))
    cols = n0 + gl.arange(0, BN, layout=gl.SliceLayout(0, mma_layout))
    ok = (out_rows < TOK)[:, None] & (cols < N)[None, :]
    gl.store(out_ptr + (x_row + out_rows)[:, None] * stride_out + cols[None, :], (acc * ACC_SCALE).to(gl.bfloat16),
             mask=ok)


def _layouts():
    return (gl.NVMMASharedLayout.get_default_for([BM, BK], gl.bfloat16),
            gl.NVMMASharedLayout.get_default_for([BN, BK // 2], gl.uint8))


def gluon_mxfp4_gemm(x: torch.Tensor, blocks: torch.Tensor, scales: torch.Tensor, tok: int, warps: int,
                     stages: int) -> torch.Tensor:
    """x [E * tok, K] bf16 (expert e's rows e * tok ...), blocks [E, N, K/2] (kernel layout), scales [E, K/32, N]
    -> [E * tok, N] bf16: each expert's rows times its weight, transposed."""
    experts, n, half_k = blocks.shape
    k = 2 * half_k
    out = torch.empty(experts * tok, n, dtype=torch.bfloat16, device=x.device)
    x_layout, c_layout = _layouts()
    x_desc = TensorDescriptor.from_tensor(x, [BM, BK], x_layout)
    c_desc = TensorDescriptor.from_tensor(blocks.view(experts * n, half_k), [BN, BK // 2], c_layout)
    _gluon_mxfp4_kernel[(experts * (n // BN),)](x_desc, c_desc, scales, out, n, k, out.stride(0), TOK=tok, BM=BM,
                                                BN=BN, BK=BK, STAGES=stages, num_warps=warps)
    return out


# Register-operand variant: the weights are wgmma's left operand straight from the decode's registers (no shared
# memory for them), the tokens the 32-wide right operand. Each thread's 4-byte word holds exactly the 8 values its
# fragment needs of one 16-column k block: rows g and g + 8 of its warp's 16, columns 2q, 2q + 1, 2q + 8, 2q + 9
# (lane = 4 g + q), in mma-pair bit order, so each pair takes one shift and one mask as in the engine's decode;
# pairs 0 and 2 (row g) take the scale $9, pairs 1 and 3 (row g + 8) $10. Each pair leaves as two bf16 halves
# ($0 .. $7) so that the tensors joined in the order (pb1, pb0, h) sit in the registers in the fragment's order.
FRAG_PTX_TEXT = (MXFP4_PAIRS_TO_BF16_PTX_TEXT  # the engine's decode: word $4; scales $12 (row g), $16 (row g + 8)
                 .replace(".reg .b32 s, t, d;", ".reg .b32 s, u, t, d;")
                 .replace("mad.lo.u32 s, $5, 0x00800080, 0x1F001F00;",
                          "mad.lo.u32 s, $12, 0x00800080, 0x1F001F00;\nmad.lo.u32 u, $16, 0x00800080, 0x1F001F00;")
                 .replace("mul.rn.bf16x2 $1, t, s;", "mul.rn.bf16x2 $1, t, u;")
                 .replace("mul.rn.bf16x2 $3, d, s;", "mul.rn.bf16x2 $3, d, u;"))
assert FRAG_PTX_TEXT.count(", u;") == 2 and "$5" not in FRAG_PTX_TEXT
FRAG_CONSTRAINTS = gl.constexpr("=r,=r,=r,=r," + ",".join(["r"] * 16))
# The first version ("halves"): one word an element, each pair leaving as two bf16 halves ($0 .. $7, word $8,
# scales $9 and $10), the 8 tensors joined so that h, then pb0, then pb1 are the fastest register indices.
FRAG_HALVES_PTX_TEXT = (FRAG_PTX_TEXT.replace("$4", "$8").replace("$12", "$9").replace("$16", "$10")
                        .replace(".reg .b32 s, u, t, d;", ".reg .b32 s, u, t, d, r;"))
for _pair in range(4):
    _line = next(line for line in FRAG_HALVES_PTX_TEXT.splitlines() if line.startswith(f"mul.rn.bf16x2 ${_pair},"))
    FRAG_HALVES_PTX_TEXT = FRAG_HALVES_PTX_TEXT.replace(
        _line, _line.replace(f"${_pair},", "r,") + f"\nmov.b32 {{${2 * _pair}, ${2 * _pair + 1}}}, r;")
FRAG_HALVES_PTX = gl.constexpr(FRAG_HALVES_PTX_TEXT)
# With FACTORS the scale operand is a pair of bf16 block factors (row g low, row g + 8 high, from
# `fragment_factors`), spread over both halves by a byte permute instead of computed from the scale bytes.
FRAG_FACTORS_PTX_TEXT = (
    FRAG_HALVES_PTX_TEXT.replace("mad.lo.u32 s, $9, 0x00800080, 0x1F001F00;", "prmt.b32 s, $9, $9, 0x1010;")
    .replace("mad.lo.u32 u, $10, 0x00800080, 0x1F001F00;", "prmt.b32 u, $9, $9, 0x3232;"))
assert FRAG_FACTORS_PTX_TEXT.count("prmt.b32") == 2
FRAG_FACTORS_PTX = gl.constexpr(FRAG_FACTORS_PTX_TEXT)
FRAG_PTX = gl.constexpr(FRAG_PTX_TEXT)
STEP_WORDS = BN * BK // 8  # packed words of a program's K step


def fragment_words(blocks: torch.Tensor) -> torch.Tensor:
    """Kernel-layout MXFP4 blocks [E, N, K/2] (mma-pair order) -> int32 [E, N/128, K/64, 1024]: for each program's
    tile of 128 rows and each 64-column step, the words in the order (warp w, g, q, m block, k block) of the
    register-operand kernel's loads, each the 8 codes of rows 64 mb + 16 w + {g, g + 8} and columns
    16 kb + {2q, 2q + 1, 2q + 8, 2q + 9} placed as the pairs (row g: 2q, 2q+1), (row g+8: same), (row g: 2q+8,
    2q+9), (row g+8: same), encoded in mma-pair bit order."""
    from quickmoe.formats.mxfp4_mma_pairs import decode_mma_pairs, encode_mma_pairs

    experts, n, half_k = blocks.shape
    k = 2 * half_k
    plain = decode_mma_pairs(blocks)  # checkpoint order: column 2j in the low nibble of byte j
    codes = torch.stack([plain & 0xF, plain >> 4], dim=-1).reshape(experts, n, k)  # [E, N, K]
    # row = 128 t + 64 mb + 16 w + 8 pb0 + g; column = 64 j + 16 kb + 8 pb1 + 2 q + h
    c = codes.view(experts, n // 128, 2, 4, 2, 8, k // 64, 4, 2, 4, 2)
    #        dims: e, t, mb, w, pb0, g, j, kb, pb1, q, h -> e, t, j, w, g, q, mb, kb, (pb1, pb0, h): word slot order
    c = c.permute(0, 1, 6, 3, 5, 9, 2, 7, 8, 4, 10).reshape(experts, n // 128, k // 64, 4, 8, 4, 2, 4, 8)
    packed = (c[..., 0::2] | (c[..., 1::2] << 4)).contiguous()  # checkpoint-order bytes of each word's 8 slots
    return encode_mma_pairs(packed).view(torch.int32).reshape(experts, n // 128, k // 64, STEP_WORDS)


def fragment_factors(scales: torch.Tensor) -> torch.Tensor:
    """E8M0 scales [E, K/32, N] -> int32 [E, N/128, K/64, 128]: for each tile and 64-column step, (warp w, g, m block,
    32-column block) -> the bf16 factors 2^(scale - 65) of rows 64 mb + 16 w + g (low half) and + 8 (high half),
    the factor the engine's decode multiplies by (so the weights come out x 2^-64)."""
    experts, blocks, n = scales.shape
    factor = (scales.to(torch.int32) + 62) << 7  # bf16 bits of 2^(scale - 65), scale 0 .. 192
    f = factor.permute(0, 2, 1).reshape(experts, n // 128, 2, 4, 2, 8, blocks // 2, 2)  # e, t, mb, w, pb0, g, j, mx
    pair = f[:, :, :, :, 0] | (f[:, :, :, :, 1] << 16)  # [e, t, mb, w, g, j, mx]
    return pair.permute(0, 1, 5, 3, 4, 2, 6).reshape(experts, n // 128, blocks // 2, 128).contiguous()


@gluon.jit
def _frag_decode_halves(words, s_g, s_g8, FACTORS: gl.constexpr = False):
    """As _frag_decode, by one PTX call a word whose 8 outputs are bf16 halves, joined in the fragment's order
    (FACTORS: s_g holds the word's factor pair, s_g8 is not read)."""
    shape: gl.constexpr = (4, 8, 4, 2, 4)  # (w, g, q, mb, kb)
    PTX_TEXT: gl.constexpr = FRAG_FACTORS_PTX if FACTORS else FRAG_HALVES_PTX
    o = gl.inline_asm_elementwise(PTX_TEXT, "=h,=h,=h,=h,=h,=h,=h,=h,r,r,r",
                                  [gl.reshape(words, shape), gl.reshape(s_g, shape), gl.reshape(s_g8, shape)],
                                  dtype=(gl.bfloat16, ) * 8, is_pure=True, pack=1)
    # o[2 p + h], p = 2 pb1 + pb0: joined so that h is the fastest register index, then pb0, then pb1
    h0 = gl.join(gl.join(o[0], o[4]), gl.join(o[2], o[6]))  # (.., pb1, pb0) of h = 0
    h1 = gl.join(gl.join(o[1], o[5]), gl.join(o[3], o[7]))
    return gl.join(h0, h1)


@gluon.jit
def _frag_decode(words, s_g, s_g8, COPIES: gl.constexpr = True, FACTORS: gl.constexpr = False):
    """A step's words and their rows' scales (int32 [1024] each, the loads' layout) -> bf16 [4, 8, 4, 2, 4, 2, 2, 2]
    (w, g, q, mb, kb, pb1, pb0, h): one inline-PTX call a word, over 8 copies of it (so that the call's output is
    8 values in one tensor, its 4 bf16x2 registers in the fragment's register order, with no repacking); or with
    COPIES false by `_frag_decode_halves`."""
    if not COPIES:
        return _frag_decode_halves(words, s_g, s_g8, FACTORS)
    shape: gl.constexpr = (4, 8, 4, 2, 4)  # (w, g, q, mb, kb)
    w8 = _dup3(gl.reshape(words, shape))
    # operands: $4 .. $11 the word, $12 .. $15 s_g, $16 .. $19 s_g8
    sc = gl.join(gl.reshape(s_g, shape), gl.reshape(s_g8, shape))  # [.., 2]: fastest axis (s_g, s_g8)
    sc = gl.join(gl.join(sc, sc), gl.join(sc, sc))  # registers: s_g x 4, then s_g8 x 4
    return gl.inline_asm_elementwise(FRAG_PTX, FRAG_CONSTRAINTS, [w8, sc], dtype=gl.bfloat16, is_pure=True, pack=8)


@gluon.jit
def _frag_loads(c_ptr, s_ptr, c_base, s_base, idx, s_rel, j, nk, N, FACTORS: gl.constexpr = False):
    """Step j's words (int32 [1024]) and the scales of their rows g and g + 8 (int32; zeros past the last step);
    FACTORS: the words' factor pairs from `fragment_factors` (s_ptr, s_base and s_rel index them), twice."""
    ok = (idx >= 0) & (j < nk)
    words = gl.load(c_ptr + c_base + j * 1024 + idx, mask=ok, other=0)
    if FACTORS:
        pair = gl.load(s_ptr + s_base + j * 128 + s_rel, mask=ok, other=0)
        return words, pair, pair
    s_g = gl.load(s_ptr + s_base + j * 2 * N + s_rel, mask=ok, other=0).to(gl.int32)
    s_g8 = gl.load(s_ptr + s_base + j * 2 * N + s_rel + 8, mask=ok, other=0).to(gl.int32)
    return words, s_g, s_g8


@gluon.jit
def _frag_step(j, acc, a_prev, c1, g1, h1, c2, g2, h2, use_acc, x_desc, x_smem, ready, x_row, c_ptr, s_ptr, c_base,
               s_base, idx, s_rel, N, nk, DOT_A: gl.constexpr, STAGES: gl.constexpr, OUTSTANDING: gl.constexpr,
               COPIES: gl.constexpr, FACTORS: gl.constexpr):
    """K step j with step j's words and scales (c1, g1, h1) and step j + 1's already in flight: loads step j + 2's,
    decodes step j into wgmma's register operand, issues its wgmma, waits for step j - 1's (whose operand
    registers, a_prev, live until then), refills step j - 1's activation stage."""
    c3, g3, h3 = _frag_loads(c_ptr, s_ptr, c_base, s_base, idx, s_rel, j + 2, nk, N, FACTORS)
    value = _frag_decode(c1, g1, h1, COPIES, FACTORS)  # (w, g, q, mb, kb, pb1, pb0, h)
    value = gl.permute(value, (3, 0, 6, 1, 4, 5, 2, 7))  # (mb, w, pb0, g, kb, pb1, q, h)
    a = gl.convert_layout(gl.reshape(value, (128, 64)), DOT_A)  # [128 weight rows, 64 columns]
    s = j % STAGES
    mbarrier.wait(ready.index(s), (j // STAGES) & 1)
    acc = warpgroup_mma(a, x_smem.index(s).permute((1, 0)), acc, use_acc=use_acc, is_async=True)
    acc, a_prev = warpgroup_mma_wait(num_outstanding=OUTSTANDING, deps=(acc, a_prev))
    s_prev = (j - 1 + STAGES) % STAGES
    refill = (j >= 1) & (j - 1 + STAGES < nk)
    mbarrier.expect(ready.index(s_prev), x_desc.block_type.nbytes, pred=refill)
    tma.async_copy_global_to_shared(x_desc, [x_row, (j - 1 + STAGES) * 64], ready.index(s_prev),
                                    x_smem.index(s_prev), pred=refill)
    return acc, a, c2, g2, h2, c3, g3, h3


@gluon.jit
def _gluon_mxfp4_frag_kernel(x_desc, c_ptr, s_ptr, out_ptr, N, K, stride_out, TOK: gl.constexpr,
                             STAGES: gl.constexpr, OUTSTANDING: gl.constexpr, COPIES: gl.constexpr,
                             FACTORS: gl.constexpr, num_warps: gl.constexpr):
    num_n = N // 128
    pid = gl.program_id(0)
    e = pid // num_n
    t = pid % num_n
    n0 = t * 128
    x_row = e * TOK
    nk = K // 64
    x_smem = gl.allocate_shared_memory(gl.bfloat16, [STAGES, TOK, 64], x_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.expect(ready.index(i), x_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(x_desc, [x_row, i * 64], ready.index(i), x_smem.index(i))
    L1: gl.constexpr = gl.BlockedLayout([8], [32], [num_warps], [0])  # a thread's 8 words, 32 bytes
    idx = gl.arange(0, 1024, layout=L1)  # (w, g, q, mb, kb) of a step's words
    kb = idx % 4
    mb = (idx // 4) % 2
    g = (idx // 32) % 8
    w = idx // 256
    if FACTORS:  # (w, g, mb, 32-column block) of fragment_factors' 128 pairs a step
        s_rel = ((w * 8 + g) * 2 + mb) * 2 + kb // 2
        s_base = (e * num_n + t) * nk * 128
    else:
        s_rel = (kb // 2) * N + mb * 64 + w * 16 + g  # the scale byte of row g (row g + 8: 8 further)
        s_base = e * (K // 32) * N + n0
    c_base = (e * num_n + t) * nk * 1024
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, TOK, 16])
    DOT_A: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    c1, g1, h1 = _frag_loads(c_ptr, s_ptr, c_base, s_base, idx, s_rel, 0, nk, N, FACTORS)
    c2, g2, h2 = _frag_loads(c_ptr, s_ptr, c_base, s_base, idx, s_rel, 1, nk, N, FACTORS)
    acc = gl.zeros((128, TOK), dtype=gl.float32, layout=mma)
    a_prev = gl.zeros((128, 64), dtype=gl.bfloat16, layout=DOT_A)
    acc, a_prev, c1, g1, h1, c2, g2, h2 = _frag_step(0, acc, a_prev, c1, g1, h1, c2, g2, h2, False, x_desc, x_smem,
                                                     ready, x_row, c_ptr, s_ptr, c_base, s_base, idx, s_rel, N, nk,
                                                     DOT_A, STAGES, OUTSTANDING, COPIES, FACTORS)
    for j in range(1, nk):
        acc, a_prev, c1, g1, h1, c2, g2, h2 = _frag_step(j, acc, a_prev, c1, g1, h1, c2, g2, h2, True, x_desc,
                                                         x_smem, ready, x_row, c_ptr, s_ptr, c_base, s_base, idx,
                                                         s_rel, N, nk, DOT_A, STAGES, OUTSTANDING, COPIES, FACTORS)
    acc, a_prev = warpgroup_mma_wait(num_outstanding=0, deps=(acc, a_prev))
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))
    rows = n0 + gl.arange(0, 128, layout=gl.SliceLayout(1, mma))
    toks = gl.arange(0, TOK, layout=gl.SliceLayout(0, mma))
    gl.store(out_ptr + (x_row + toks)[None, :] * stride_out + rows[:, None], (acc * ACC_SCALE).to(gl.bfloat16))


@gluon.jit
def _frag_decode_check_kernel(c_ptr, s_ptr, out_ptr, N, K, COPIES: gl.constexpr, num_warps: gl.constexpr):
    """Debug: expert 0, rows 0..127, step 0 decoded as the register-operand kernel does, stored [128, 64] (bf16,
    weights x 2^-64) through a plain layout."""
    L1: gl.constexpr = gl.BlockedLayout([8], [32], [num_warps], [0])
    idx = gl.arange(0, 1024, layout=L1)
    kb = idx % 4
    mb = (idx // 4) % 2
    g = (idx // 32) % 8
    w = idx // 256
    s_rel = (kb // 2) * N + mb * 64 + w * 16 + g
    c1, g1, h1 = _frag_loads(c_ptr, s_ptr, 0, 0, idx, s_rel, 0, K // 64, N)
    value = gl.permute(_frag_decode(c1, g1, h1, COPIES), (3, 0, 6, 1, 4, 5, 2, 7))
    B: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    value = gl.convert_layout(gl.reshape(value, (128, 64)), B)
    rows = gl.arange(0, 128, layout=gl.SliceLayout(1, B))
    cols = gl.arange(0, 64, layout=gl.SliceLayout(0, B))
    gl.store(out_ptr + rows[:, None] * 64 + cols[None, :], value)


def gluon_mxfp4_frag_gemm(x: torch.Tensor, words: torch.Tensor, scales: torch.Tensor, tok: int, stages: int,
                          warps: int = 4, outstanding: int = 1, decode: str = "halves",
                          factors: torch.Tensor | None = None) -> torch.Tensor:
    """x [E * tok, K] bf16, words = fragment_words(blocks) [E, N/128, K/64, 1024], scales [E, K/32, N] -> [E * tok,
    N] bf16 (as gluon_mxfp4_gemm). decode: "halves" (`_frag_decode_halves`) or "copies" (`_frag_decode`).
    outstanding: wgmma groups left in flight at each step's wait (1 overlaps a step's decode with the last one's
    wgmma but gives wrong results: see the module docstring). factors: `fragment_factors(scales)`, read instead of
    the scales ("halves" only)."""
    experts, tiles, steps, _ = words.shape
    n, k = tiles * 128, steps * 64
    out = torch.empty(experts * tok, n, dtype=torch.bfloat16, device=x.device)
    x_layout = gl.NVMMASharedLayout.get_default_for([tok, 64], gl.bfloat16)
    x_desc = TensorDescriptor.from_tensor(x, [tok, 64], x_layout)
    assert factors is None or decode == "halves"
    _gluon_mxfp4_frag_kernel[(experts * tiles,)](x_desc, words, scales if factors is None else factors, out, n, k,
                                                  out.stride(0), TOK=tok, FACTORS=factors is not None,
                                                  STAGES=stages, OUTSTANDING=outstanding,
                                                  COPIES=decode == "copies", num_warps=warps)
    return out


def compile_only() -> None:
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    x_layout, c_layout = _layouts()
    for warps, stages in CONFIGS:
        signature = {"x_desc": f"tensordesc<bf16[{BM}, {BK}],{x_layout!r}>",
                     "c_desc": f"tensordesc<u8[{BN}, {BK // 2}],{c_layout!r}>", "s_ptr": "*u8", "out_ptr": "*bf16",
                     "N": "i32", "K": "i32", "stride_out": "i32", "TOK": "constexpr", "BM": "constexpr",
                     "BN": "constexpr", "BK": "constexpr", "STAGES": "constexpr", "num_warps": "constexpr"}
        constexprs = {"TOK": 32, "BM": BM, "BN": BN, "BK": BK, "STAGES": stages, "num_warps": warps}
        src = GluonASTSource(_gluon_mxfp4_kernel, signature, constexprs)
        kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
        tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
        with tempfile.TemporaryDirectory() as tmp:
            cubin = Path(tmp) / "kernel.cubin"
            cubin.write_bytes(kernel.asm["cubin"])
            usage = subprocess.run([str(tools / "cuobjdump"), "-res-usage", str(cubin)], capture_output=True,
                                   text=True).stdout
            sass = subprocess.run([str(tools / "nvdisasm"), "-c", str(cubin)], capture_output=True, text=True).stdout
        usage = next((line.strip() for line in usage.splitlines() if "REG:" in line), "no resource usage")
        marks = [re.sub(r"\s+", " ", line.strip())[10:70] for line in sass.splitlines()
                 if re.search(r"HGMMA|WARPGROUP\.DEPBAR|BAR\.SYNC|SYNCS|BRA `", line)]
        print(f"warps {warps} stages {stages}: {usage}; shared {kernel.metadata.shared}", flush=True)
        for mark in marks[:40]:
            print("   ", mark, flush=True)


def _rel_err(got: torch.Tensor, xs0: torch.Tensor, tok: int, refs: dict) -> float:
    """Largest error of experts 0 and E - 1's rows against x @ W^T in float32, relative to the output's largest."""
    errs = []
    for e, w in refs.items():
        ref = xs0[e * tok:(e + 1) * tok].float() @ w.t()
        errs.append(((got[e * tok:(e + 1) * tok].float() - ref).abs().max() / ref.abs().max()).item())
    return max(errs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--tok", default="8,16,32,64",
                        help="assignments per expert (balanced routing of 8 x tok tokens over 32 experts, top 4)")
    parser.add_argument("--profile-once", action="store_true",
                        help="after warm-ups, one launch of each kernel at 32 rows an expert (the Triton GEMM 1, the "
                             "Gluon shared-operand w4 s3, the register-operand s3 with wait(1) and wait(0)) between "
                             "cudaProfilerStart and Stop, for `ncu --profile-from-start off`; nothing timed")
    args = parser.parse_args()
    if args.compile_only:
        compile_only()
        return
    from quickmoe.bench.attention import time_in_graph
    from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
    from quickmoe.kernels.fused_moe import device_arch
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_configs import moe_kernel_config
    from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu
    from quickmoe.layouts.mxfp4_moe import dequantize_expert

    device = torch.device("cuda")
    g = torch.Generator().manual_seed(0)
    spec = SHAPES["gpt-oss-20b"]
    ex = make_experts(spec, "mxfp4", device, g)
    w1_scales = ex.kwargs["w1_scales"]
    refs = {e: dequantize_expert(ex.w1[e], w1_scales[e], torch.float32) for e in (0, spec.experts - 1)}  # [2I, H]
    words = fragment_words(ex.w1)
    factors = fragment_factors(w1_scales)
    sets = 4
    rows = []

    # the register-operand layout decoded and stored as is: every value of expert 0's first tile and step
    for copies in (False, True):
        check = torch.empty(128, 64, dtype=torch.bfloat16, device=device)
        _frag_decode_check_kernel[(1,)](words, w1_scales, check, 2 * spec.inter, spec.hidden, COPIES=copies,
                                        num_warps=4)
        bad = int((check.float() * MXFP4_PAIRS_ACC_SCALE != refs[0][:128, :64]).sum())
        print(f"decode check (register-operand layout, {'copies' if copies else 'halves'}): {bad} of 8192 values "
              "differ", flush=True)
    x_check = torch.randn(spec.experts * 32, spec.hidden, generator=g).to(torch.bfloat16).to(device)
    for steps in (1, 3, 45):  # a wait for all but the last wgmma lets the next steps overwrite its operand registers
        x_small = x_check[:, :64 * steps].contiguous()
        ref1 = x_small[:32].float() @ refs[0][:, :64 * steps].t()
        for outstanding in (1, 0):
            one = gluon_mxfp4_frag_gemm(x_small, words[:, :, :steps].contiguous(), w1_scales, 32, 3,
                                        outstanding=outstanding).float()  # expert 0: its scales start at 0
            err = ((one[:32] - ref1).abs().max() / ref1.abs().max()).item()
            print(f"register operand, {steps} K steps, wait({outstanding}): max error {err:.2e}", flush=True)

    for tok in [int(t) for t in args.tok.split(",")]:
        tokens = tok * spec.experts // spec.top_k
        xs = [torch.randn(spec.experts * tok, spec.hidden, generator=g).to(torch.bfloat16).to(device)
              for _ in range(sets)]
        # the engine's GEMM 1 on balanced routing: token t's j-th expert is (4 t + j) % 32, tok assignments each
        ids = ((torch.arange(tokens)[:, None] * spec.top_k + torch.arange(spec.top_k)[None, :]) % spec.experts)
        ids = ids.to(torch.int32).to(device)
        config = moe_kernel_config(spec.experts, 2 * spec.inter, spec.hidden, "mxfp4",
                                   torch.cuda.get_device_name(device), tokens, arch=device_arch(device),
                                   proj="gate_up")
        align = moe_align(ids, spec.experts, config.block_m)
        acts = [x[:tokens].contiguous() for x in xs]

        def triton_gemm1(i, acts=acts, align=align, config=config):
            return moe_gemm1_swiglu(acts[i], align, spec.top_k, ex.w1, ex.b1, w1_scales, GROUP, 7.0, 1.702,
                                    out_dtype=torch.bfloat16, config=config)

        if args.profile_once:
            if tok != 32:
                continue
            for _ in range(3):
                triton_gemm1(0)
                gluon_mxfp4_gemm(xs[0], ex.w1, w1_scales, tok, 4, 3)
                gluon_mxfp4_frag_gemm(xs[0], words, w1_scales, tok, 3)
                gluon_mxfp4_frag_gemm(xs[0], words, w1_scales, tok, 3, outstanding=0)
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStart()
            triton_gemm1(1)
            gluon_mxfp4_gemm(xs[1], ex.w1, w1_scales, tok, 4, 3)
            gluon_mxfp4_frag_gemm(xs[1], words, w1_scales, tok, 3)
            gluon_mxfp4_frag_gemm(xs[1], words, w1_scales, tok, 3, outstanding=0)
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStop()
            return
        results = {f"triton moe_gemm1_swiglu T={tokens} (block_m {config.block_m}, block_n {config.block_n}, "
                   f"block_k {config.block_k}, w{config.num_warps}, swap {int(config.swap_ab)})":
                   time_in_graph(triton_gemm1, sets, 16)}
        variants = [(f"gluon register operand 128x{tok}x64 w4 s{st} wait({o}) {dec}",
                     lambda i, st=st, o=o, dec=dec, xs=xs, tok=tok: gluon_mxfp4_frag_gemm(
                         xs[i], words, w1_scales, tok, st, outstanding=o, decode=dec))
                    for st, o, dec in ((3, 0, "halves"), (4, 0, "halves"), (3, 0, "copies"), (4, 1, "halves"))]
        variants += [(f"gluon register operand 128x{tok}x64 w4 s{st} wait(0) halves, factor pairs",
                      lambda i, st=st, xs=xs, tok=tok: gluon_mxfp4_frag_gemm(
                          xs[i], words, w1_scales, tok, st, outstanding=0, factors=factors))
                     for st in (3, 4)]
        if tok >= 32:
            variants.append((f"gluon shared operand {BM}x{BN}x{BK} w4 s3",
                             lambda i, xs=xs, tok=tok: gluon_mxfp4_gemm(xs[i], ex.w1, w1_scales, tok, 4, 3)))
        for label, fn in variants:
            try:
                label += f" (err {_rel_err(fn(0), xs[0], tok, refs):.1e})"
                results[label] = time_in_graph(fn, sets, 16)
            except Exception as exc:  # noqa: BLE001 - a probe reports and goes on
                print(f"tok {tok} {label}: {type(exc).__name__}: {str(exc)[:400]}", flush=True)
        weight_bytes = ex.w1.numel() + w1_scales.numel()
        for label, sec in results.items():
            row = {"tok": tok, "tokens": tokens, "kernel": label, "us": sec * 1e6,
                   "weight_gb_s": weight_bytes / sec / 1e9}
            rows.append(row)
            print(f"tok {tok:3d}  {label:100s} {sec * 1e6:8.1f} us {row['weight_gb_s']:7.0f} GB/s of weights",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
