"""The MoE GEMMs' operand tiles, for the K loops of `kernels/moe_gemm1_kernel.py` and `moe_gemm2_kernel.py`: weight
tiles in each format (MXFP4 and NVFP4 decoded, FP8 and dense loaded as they are, by pointer or from a TMA
descriptor), the block scales, activation tiles gathered row by row (MXFP8 decoded), an FP8 step's scale factors,
and the tensor-core product in either orientation (each program's tile: `kernels/moe_program_tile.py`).

FP4 is decoded by inline PTX on the GPU (`MXFP4_PAIRS_TO_BF16_PTX_TEXT`; NVFP4: `NVFP4_PAIRS_TO_BF16_PTX_TEXT`, the
same shifts and masks, another scale), whose outputs are the weights times a power of two that the GEMMs' epilogues
take out of their float32 accumulators (`PAIRS_ACC`, `NVFP4_ACC`); in Triton's interpreter through float16 bit
patterns and float32. Both are exact.
"""

from __future__ import annotations

from quickmoe.formats.mxfp4_mma_pairs import BIT_PLACES

try:  # CPU installs without triton keep the torch references of the kernels that use these
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["MXFP4_PAIRS_ACC_SCALE", "MXFP4_PAIRS_TO_BF16_PTX_TEXT", "NVFP4_PAIRS_ACC_SCALE",
           "NVFP4_PAIRS_FACTOR_SCALE", "NVFP4_PAIRS_TO_BF16_PTX_TEXT"]


# MXFP4 in the mma-pair order (`formats.mxfp4_mma_pairs`): one 32-bit word of a row holds the 8
# values of columns 8g .. 8g+7, placed so that each output register is one bf16x2 pair of adjacent columns and
# takes one shift and one mask (the last pair three of each). Value v of a pair sits with its sign at bit 15 and
# its exponent and mantissa bits e1 e0 m at bits 8, 7, 6 of its 16-bit half (the other value 16 bits higher):
# those bits read as a bf16 are v x 2^-126 exactly (e = 0 is the subnormal m/2 x 2^-126). One multiply by
# 2^(scale - 65) (a bf16 for every scale 0 .. 192; the product exact from scale 60 on) gives the weight x 2^-64;
# the kernels multiply their float32
# accumulators by 2^64 after the K loop. Inputs: $4 = the word, $5 = its block's E8M0 scale byte (as a 32-bit
# integer; $6-$8 the same). Outputs: $0 = columns (8g, 8g+1), $1 = (8g+2, 8g+3), $2 = (8g+4, 8g+5), $3 = (8g+6,
# 8g+7), low half first. Bit positions (column: e1 e0 m, sign; +16 for the odd column of each pair):
#   8g: 8 7 6, 15    8g+2: 5 4 3, 12    8g+4: 2 1 0, 9    8g+6: 14 13 11, 10
PAIRS_DECODE = """
and.b32 t, $4, 0x81C081C0;
mul.rn.bf16x2 $0, t, s;
shl.b32 t, $4, 3;
and.b32 t, t, 0x81C081C0;
mul.rn.bf16x2 $1, t, s;
shl.b32 t, $4, 6;
and.b32 t, t, 0x81C081C0;
mul.rn.bf16x2 $2, t, s;
shr.u32 t, $4, 6;
and.b32 d, t, 0x01800180;
shr.u32 t, $4, 5;
and.b32 t, t, 0x00400040;
or.b32 d, d, t;
shl.b32 t, $4, 5;
and.b32 t, t, 0x80008000;
or.b32 d, d, t;
mul.rn.bf16x2 $3, d, s;
}
"""
MXFP4_PAIRS_TO_BF16_PTX_TEXT = """
{
.reg .b32 s, t, d;
mad.lo.u32 s, $5, 0x00800080, 0x1F001F00;""" + PAIRS_DECODE
# NVFP4 in the same mma-pair order (the layout encodes it as MXFP4's): the same shifts and masks, and the multiply
# takes the factor as given, $5 = its 16-value block's E4M3 scale x 2^119 as bf16x2 (both halves; $6 the same),
# which bf16 holds exactly for every E4M3 value (at most 4 significant bits, 2^-9 .. 448: 2^110 .. 2^127.8). The
# outputs are weight x 2^-7 (value x 2^-126 x scale x 2^119), exact (at most 6 significant bits, 2^-17 .. 21,
# which float16 dots also hold); the kernels multiply their float32 accumulators by 2^7 after the K loop.
NVFP4_PAIRS_TO_BF16_PTX_TEXT = """
{
.reg .b32 s, t, d;
mov.b32 s, $5;""" + PAIRS_DECODE
MXFP4_PAIRS_ACC_SCALE = 2.0 ** 64  # the factor of the float32 accumulators after a K loop of that decode
NVFP4_PAIRS_FACTOR_SCALE = 2.0 ** 119  # the E4M3 scales' factor as the NVFP4 decode takes them
NVFP4_PAIRS_ACC_SCALE = 2.0 ** 7  # the accumulators' factor after a K loop of the NVFP4 decode

if triton is not None:
    NVFP4_PAIRS_TO_BF16_PTX = tl.constexpr(NVFP4_PAIRS_TO_BF16_PTX_TEXT)
    PAIRS_ACC = tl.constexpr(MXFP4_PAIRS_ACC_SCALE)
    NVFP4_FACTOR = tl.constexpr(NVFP4_PAIRS_FACTOR_SCALE)
    NVFP4_ACC = tl.constexpr(NVFP4_PAIRS_ACC_SCALE)
    assert BIT_PLACES == ((8, 7, 6, 15), (24, 23, 22, 31), (5, 4, 3, 12), (21, 20, 19, 28), (2, 1, 0, 9),
                          (18, 17, 16, 25), (14, 13, 11, 10), (30, 29, 27, 26)), "mma_pair_codes spells them out"
    MXFP4_PAIRS_TO_BF16_PTX = tl.constexpr(MXFP4_PAIRS_TO_BF16_PTX_TEXT)  # jit functions read constexpr globals only

    @triton.jit
    def e4m3_to_float(raw, TIMES: tl.constexpr = 1.0):
        """E4M3 bytes (uint8) -> float32 (times TIMES, a power of two), exact: the 7 bits below the sign placed at
        float16 bits 13..7 read as the E4M3 value times 2^-8 (exponent biases 15 and 7; subnormals alike)."""
        bits = ((raw & 0x7F).to(tl.uint16) << 7) | ((raw & 0x80).to(tl.uint16) << 8)
        return bits.to(tl.float16, bitcast=True).to(tl.float32) * (256.0 * TIMES)

    @triton.jit
    def block_scales(s_ptr, expert, rows, row_ok, k0, N, K, NVFP4: tl.constexpr, BLOCK_K: tl.constexpr,
                      TIMES: tl.constexpr = 1.0):
        """The scales of rows `rows` over columns [k0, k0 + BLOCK_K) as float32 [R, BLOCK_K / SB]: E8M0 per 32
        columns (MXFP4, 2^(s - 127)) or E4M3 per 16 (NVFP4; times TIMES), transposed [E, K/SB, N] in memory."""
        if NVFP4:
            factor = e4m3_to_float(nvfp4_scale_bytes(s_ptr, expert, rows, row_ok, k0, N, K, BLOCK_K), TIMES)
        else:
            blocks = k0 // 32 + tl.arange(0, BLOCK_K // 32)  # [BK/32]
            scale = tl.load(s_ptr + expert * (K // 32) * N + blocks[None, :] * N + rows[:, None],
                            mask=row_ok[:, None] & (blocks[None, :] < K // 32), other=127)
            factor = tl.exp2(scale.to(tl.float32) - 127.0)
        return factor

    @triton.jit
    def pair_place(i, P0: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr,
                    P4: tl.constexpr, P5: tl.constexpr, P6: tl.constexpr, P7: tl.constexpr):
        """[8] -> the bit number P_i of column i of a word (one field of `formats.mxfp4_mma_pairs.BIT_PLACES`)."""
        return tl.where(i == 0, P0, tl.where(i == 1, P1, tl.where(i == 2, P2, tl.where(i == 3, P3, tl.where(
            i == 4, P4, tl.where(i == 5, P5, tl.where(i == 6, P6, P7)))))))

    @triton.jit
    def mma_pair_codes(packed, ROWS: tl.constexpr, BLOCK_K: tl.constexpr):
        """Packed bytes [R, BK/2] in mma-pair order -> the E2M1 codes [R, BK] (uint16) in column order."""
        shifts = tl.arange(0, 4) * 8
        words = tl.sum(tl.reshape(packed, (ROWS, BLOCK_K // 8, 4)).to(tl.uint32) << shifts[None, None, :].to(tl.uint32),
                       axis=2)  # [R, BK/8] little-endian words (disjoint bits: the sum is an OR)
        i = tl.arange(0, 8)  # column within the word
        e1 = pair_place(i, 8, 24, 5, 21, 2, 18, 14, 30).to(tl.uint32)
        e0 = pair_place(i, 7, 23, 4, 20, 1, 17, 13, 29).to(tl.uint32)
        m = pair_place(i, 6, 22, 3, 19, 0, 16, 11, 27).to(tl.uint32)
        s = pair_place(i, 15, 31, 12, 28, 9, 25, 10, 26).to(tl.uint32)
        w = words[:, :, None]  # [R, BK/8, 1]
        codes = (((w >> m[None, None, :]) & 1) | (((w >> e0[None, None, :]) & 1) << 1)
                 | (((w >> e1[None, None, :]) & 1) << 2) | (((w >> s[None, None, :]) & 1) << 3))  # [R, BK/8, 8]
        return tl.reshape(codes, (ROWS, BLOCK_K)).to(tl.uint16)

    @triton.jit
    def nvfp4_scale_bytes(s_ptr, expert, rows, row_ok, k0, N, K, BLOCK_K: tl.constexpr):
        """The E4M3 scale bytes of rows `rows` over columns [k0, k0 + BLOCK_K) -> uint8 [R, BK/16] (1.0 past K)."""
        blocks = k0 // 16 + tl.arange(0, BLOCK_K // 16)  # [BK/16]
        return tl.load(s_ptr + expert * (K // 16) * N + blocks[None, :] * N + rows[:, None],
                       mask=row_ok[:, None] & (blocks[None, :] < K // 16), other=0x38)  # 0x38: 1.0

    @triton.jit
    def step_scales(s_ptr, expert, rows, row_ok, k0, N, K, NVFP4: tl.constexpr, BLOCK_K: tl.constexpr):
        """The block scales the PTX decode of a K step takes from its caller (`weight_tile`'s `scales`): NVFP4's
        E4M3 bytes [R, BK/16], else MXFP4's E8M0 bytes as int32 [R, BK/32]."""
        if NVFP4:
            scales = nvfp4_scale_bytes(s_ptr, expert, rows, row_ok, k0, N, K, BLOCK_K)
        else:
            scales = mxfp4_scales(s_ptr, expert, rows, row_ok, k0, N, K, BLOCK_K)
        return scales

    @triton.jit
    def mxfp4_scales(s_ptr, expert, rows, row_ok, k0, N, K, BLOCK_K: tl.constexpr):
        """The E8M0 scale bytes of rows `rows` over columns [k0, k0 + BLOCK_K) -> int32 [R, BK/32] (0 past K)."""
        blocks = k0 // 32 + tl.arange(0, BLOCK_K // 32)  # [BK/32]
        scale = tl.load(s_ptr + expert * (K // 32) * N + blocks[None, :] * N + rows[:, None],
                        mask=row_ok[:, None] & (blocks[None, :] < K // 32), other=0)  # [R, BK/32]
        return scale.to(tl.int32)

    @triton.jit
    def weight_tile(w_ptr, s_ptr, expert, rows, row_ok, k0, N, K, MXFP4: tl.constexpr, NVFP4: tl.constexpr,
                     ROWS: tl.constexpr, BLOCK_K: tl.constexpr, DOT_DTYPE: tl.constexpr, PTX: tl.constexpr,
                     MXFP4_PTX: tl.constexpr, scales=None, W_TMA: tl.constexpr = False, row0=0,
                     NVFP4_SCALES: tl.constexpr = False):
        """Rows `rows` [ROWS] of expert `expert`'s [N, K] weight, columns [k0, k0 + BLOCK_K) -> [ROWS, BLOCK_K]
        in DOT_DTYPE, zero where masked. MXFP4 and NVFP4 are decoded here: E2M1 code c = sign(c & 8) x magnitude
        (exponent e = (c >> 1) & 3, mantissa m = c & 1: e == 0 -> m / 2, else 2^(e-1) (1 + m / 2)), times the
        block scale (2^(scale - 127) per 32 columns, or an E4M3 value per 16). Both formats' codes are in mma-pair
        order (`formats.mxfp4_mma_pairs`). MXFP4_PTX: through `MXFP4_PAIRS_TO_BF16_PTX`, the weights times 2^-64
        (the caller multiplies its accumulators by MXFP4_PAIRS_ACC_SCALE); NVFP4 with PTX: through
        `NVFP4_PAIRS_TO_BF16_PTX`, the weights times 2^-7 (the caller's factor NVFP4_PAIRS_ACC_SCALE); else
        through float16 bit patterns and float32 (the interpreter, and MXFP4 with float16 dots). All are exact
        (E2M1 x E4M3 has at most 6 significant bits). FP8 (and dense) weights are loaded as they are, converted to DOT_DTYPE (FP8 stays e4m3 on the
        GPU; its scales are applied per K step by the kernels). W_TMA: w_ptr is a tensor descriptor of the weights
        as [E * N, K] (packed: [E * N, K / 2] bytes) and the tile is its block at row expert * N + row0 (`rows` =
        row0 + arange, unmasked: rows past N only feed masked outputs). `scales`: this step's block scales from the
        caller (`step_scales`), always with MXFP4_PTX; with NVFP4's PTX decode only when NVFP4_SCALES (the caller
        loaded them a step ahead), else the tile loads them itself."""
        if MXFP4 or NVFP4:
            if W_TMA:
                packed = w_ptr.load([(expert * N + row0).to(tl.int32), k0 // 2])  # [R, BK/2] uint8
            else:
                byte_cols = k0 // 2 + tl.arange(0, BLOCK_K // 2)  # [BK/2]
                ok = row_ok[:, None] & (byte_cols[None, :] < K // 2)
                packed = tl.load(w_ptr + expert * N * (K // 2) + rows[:, None] * (K // 2) + byte_cols[None, :],
                                 mask=ok, other=0)  # [R, BK/2] uint8
            if MXFP4_PTX:  # `scales`: mxfp4_scales of this tile, from the caller (see SCALES_AHEAD_BLOCK_M)
                scale = tl.reshape(tl.broadcast_to(scales[:, :, None], (ROWS, BLOCK_K // 32, 16)),
                                   (ROWS, BLOCK_K // 2))  # each byte's block scale
                low, high = tl.inline_asm_elementwise(MXFP4_PAIRS_TO_BF16_PTX, "=r,=r,=r,=r,r,r,r,r,r",
                                                      [packed, scale], dtype=(tl.bfloat16, tl.bfloat16),
                                                      is_pure=True, pack=4)
                # low: columns 8g + 0..3 of word g, high: 8g + 4..7 (each register one adjacent pair)
                value = tl.join(tl.reshape(low, (ROWS, BLOCK_K // 8, 4)), tl.reshape(high, (ROWS, BLOCK_K // 8, 4)))
                value = tl.reshape(tl.permute(value, (0, 1, 3, 2)), (ROWS, BLOCK_K)).to(DOT_DTYPE)  # [R, BK]
            elif PTX and NVFP4:  # the caller multiplies its accumulators by NVFP4_ACC
                if NVFP4_SCALES:  # `scales`: nvfp4_scale_bytes of this tile, loaded a step ahead by the caller
                    raw = scales
                else:
                    raw = nvfp4_scale_bytes(s_ptr, expert, rows, row_ok, k0, N, K, BLOCK_K)
                factor = e4m3_to_float(raw, NVFP4_FACTOR).to(tl.bfloat16)  # [R, BK/16], exact
                # each byte's scale: the 8 bytes of a 16-value block share it
                factor = tl.reshape(tl.broadcast_to(factor[:, :, None], (ROWS, BLOCK_K // 16, 8)),
                                    (ROWS, BLOCK_K // 2))
                low, high = tl.inline_asm_elementwise(NVFP4_PAIRS_TO_BF16_PTX, "=r,=r,=r,=r,r,r,r", [packed, factor],
                                                      dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)
                # as MXFP4's: low = columns 8g + 0..3 of word g, high = 8g + 4..7
                value = tl.join(tl.reshape(low, (ROWS, BLOCK_K // 8, 4)), tl.reshape(high, (ROWS, BLOCK_K // 8, 4)))
                value = tl.reshape(tl.permute(value, (0, 1, 3, 2)), (ROWS, BLOCK_K)).to(DOT_DTYPE)  # [R, BK]
            else:
                codes = mma_pair_codes(packed, ROWS, BLOCK_K)  # [R, BK] (MXFP4 and NVFP4: mma-pair order)
                # E2M1 bits s e e m placed as a float16 (exponent field e, mantissa msb m, sign on top): reads
                # 2^(e-15) (1 + m/2), or the subnormal (m/2) 2^-14 when e == 0: the E2M1 value times 2^-14
                half = (((codes & 7) << 9) | ((codes & 8) << 12)).to(tl.float16, bitcast=True)  # [R, BK]
                value = half.to(tl.float32) * 16384.0  # exact: back to the E2M1 value
                factor = block_scales(s_ptr, expert, rows, row_ok, k0, N, K, NVFP4, BLOCK_K)  # [R, BK/SB]
                if NVFP4:
                    value = tl.reshape(value, (ROWS, BLOCK_K // 16, 16)) * factor[:, :, None]
                else:
                    value = tl.reshape(value, (ROWS, BLOCK_K // 32, 32)) * factor[:, :, None]
                value = tl.reshape(value, (ROWS, BLOCK_K)).to(DOT_DTYPE)
        elif W_TMA:
            value = w_ptr.load([(expert * N + row0).to(tl.int32), k0]).to(DOT_DTYPE)  # [ROWS, BK]
        else:
            cols = k0 + tl.arange(0, BLOCK_K)
            value = tl.load(w_ptr + expert * N * K + rows[:, None] * K + cols[None, :],
                            mask=row_ok[:, None] & (cols[None, :] < K), other=0.0).to(DOT_DTYPE)
        return value

    @triton.jit
    def fp8_step_scales(as_ptr, s_ptr, expert, act_rows, act_ok, rows, row_ok, row0, k0, N, K, stride_as,
                         SCALE_ROWS: tl.constexpr, ONE_SCALE: tl.constexpr, SWAP_AB: tl.constexpr):
        """The factor of one 128-column step of an FP8 GEMM: activation scale x weight scale, from the per-token
        scales [T, K/128] and the weights' scales [E, K/128, N / SCALE_ROWS] (one per SCALE_ROWS kernel rows).
        ONE_SCALE (the tile's rows [row0, row0 + BLOCK_N) share one scale): [BM, 1] (or [1, BM] with SWAP_AB),
        one product per assignment; else the outer product [BM, R] (or [R, BM]). The products are the same floats
        either way, and so is the caller's FFMA; the per-tile factor saves a multiply per accumulator element and
        the registers of the factor tile (the tuned FP8 config spilled with it)."""
        a_s = tl.load(as_ptr + act_rows * stride_as + k0 // 128, mask=act_ok, other=0.0)  # [BM]
        w_s_ptr = s_ptr + expert * (K // 128) * (N // SCALE_ROWS) + (k0 // 128) * (N // SCALE_ROWS)
        if ONE_SCALE:
            w_s = tl.load(w_s_ptr + row0 // SCALE_ROWS)  # scalar
            if SWAP_AB:
                factor = a_s[None, :] * w_s
            else:
                factor = a_s[:, None] * w_s
        else:
            w_s = tl.load(w_s_ptr + rows // SCALE_ROWS, mask=row_ok, other=0.0)  # [R]
            if SWAP_AB:
                factor = w_s[:, None] * a_s[None, :]
            else:
                factor = a_s[:, None] * w_s[None, :]
        return factor

    @triton.jit
    def act_tile(a_ptr, as_ptr, rows, row_ok, kk, K, stride_a, stride_as, A_MXFP8: tl.constexpr,
                  DOT_DTYPE: tl.constexpr, SWAP_AB: tl.constexpr):
        """Activation rows `rows` [BM], columns kk [BK] -> [BM, BK] in DOT_DTYPE, or [BK, BM] with SWAP_AB
        (MXFP8: e4m3 x 2^(scale - 127); FP8 with per-128 scales: the e4m3 values, scaled per step by the
        kernels)."""
        if SWAP_AB:
            ok = (kk[:, None] < K) & row_ok[None, :]
            offsets = rows[None, :] * stride_a + kk[:, None]
            scale_offsets = rows[None, :] * stride_as + (kk // 32)[:, None]
        else:
            ok = row_ok[:, None] & (kk[None, :] < K)
            offsets = rows[:, None] * stride_a + kk[None, :]
            scale_offsets = rows[:, None] * stride_as + (kk // 32)[None, :]
        a = tl.load(a_ptr + offsets, mask=ok, other=0.0)
        if A_MXFP8:
            scale = tl.load(as_ptr + scale_offsets, mask=ok, other=127)
            a = a.to(tl.float32) * tl.exp2(scale.to(tl.float32) - 127.0)
        return a.to(DOT_DTYPE)

    @triton.jit
    def mma(acc, w, a, PRECISION: tl.constexpr, SWAP_AB: tl.constexpr):
        """acc + a @ w^T ([BM, R]), or with SWAP_AB acc + w @ a ([R, BM], a given as [BK, BM])."""
        if SWAP_AB:
            acc = tl.dot(w, a, acc, input_precision=PRECISION)
        else:
            acc = tl.dot(a, tl.trans(w), acc, input_precision=PRECISION)
        return acc

    @triton.jit
    def zeros(ROWS: tl.constexpr, BLOCK_M: tl.constexpr, SWAP_AB: tl.constexpr):
        if SWAP_AB:
            acc = tl.zeros([ROWS, BLOCK_M], dtype=tl.float32)
        else:
            acc = tl.zeros([BLOCK_M, ROWS], dtype=tl.float32)
        return acc

    @triton.jit
    def rows_last(acc, SWAP_AB: tl.constexpr):
        """The accumulator as [BM, R] whichever orientation it was computed in."""
        if SWAP_AB:
            acc = tl.trans(acc)
        return acc

    # Orientation (SWAP_AB, a tuned choice): activations x weights^T ([BM, BK] x [BK, R]), or the transposed
    # product weights x activations^T ([R, BK] x [BK, BM]), where the decoded weights are the left operand
    # (Hopper's wgmma reads it from registers) and the assignments the narrow side (16 for decode). The
    # epilogues work on [BM, R] either way.

    # Where the K loops get the block scales of a step for the PTX decode (MXFP4's E8M0, NVFP4's E4M3 bytes):
    # decode-sized tiles (BLOCK_M below this) load them in the step (MXFP4: the caller, NVFP4: `weight_tile`), where
    # Triton's software pipeline copies them into shared memory with the weight tiles (cp.async, no layout
    # conversion, 2 of gemm 1's 4 barriers per step gone); larger tiles load them one step ahead into registers
    # (`step_scales`). H100, gpt-oss-20b shapes (docs/benchmarks.md, 2026-11-24 fourth session): in the step,
    # gemm 1 + gemm 2 at T=1 51.1 -> 44.4 us and at T=256 462 -> 424 us; one step ahead, T=1024 722 against 867 us,
    # T=4096 2157 against 2404 us. NVFP4 loaded its scales in the step at every tile until the 2026-11-29 tenth
    # session; one step ahead took Mixtral-8x7B's layer at T = 4,096 and 8,192 from 6.93 to 5.56 and from 13.34 to
    # 10.64 ms on the H200, with the same bits.
    SCALES_AHEAD_BLOCK_M = tl.constexpr(64)
    # GEMM 1's FP8 step factors (activation scale x weight scale, `fp8_step_scales`) in tiles of this many rows or
    # more whose weight rows share one scale (a [BM, 1] factor each for the gate and up rows; the one-dot tiles'
    # [BM, 2 BN] factors stay in the step) are loaded one K step ahead into registers, so that the loads' latency
    # overlaps the step before instead of stalling the promotion after its dot: the same factors, the same bits.
    # H200, each GEMM alone (docs/benchmarks.md, 2026-12-04 third session): Qwen3-30B-A3B's GEMM 1 at T = 2,048 /
    # 4,096 / 8,192 -2.2 / -4.0 / -2.6%, Mixtral-8x7B's at 2,048 -5.7%. GEMM 2 the same way lost 3-19% (173 registers
    # where its tile had 168: two programs an SM instead of three) and loads them in the step.
    FP8_FACTORS_AHEAD_BLOCK_M = tl.constexpr(64)
