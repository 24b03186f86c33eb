"""The K loop of the register-operand MoE GEMMs (`moe_gemm_register`; Hopper, Gluon): a step's packed MXFP4 weights
decoded straight into wgmma's A fragments, the activations wgmma's shared-memory B operand.

**Which words a thread needs.** In a 16 x 16 k block of the A operand, lane (g, q) (lane = 4 g + q) holds rows g
and g + 8, columns 2q, 2q + 1 and 2q + 8, 2q + 9. A K step of 64 has four k blocks, so a thread needs 8 column pairs of
each of its rows. The GEMM sums over k in any order as long as both operands use the same one, so the kernel lets a
step's *logical* column 16 kb + 8 s + 2 q + h (k block kb, half s, lane q, h = 0, 1) be the *physical* column
`moe_gather_permuted.PHYSICAL_COLUMN` = 16 q + 4 kb + 2 s + h of the weights: lane q's 8 pairs of a row are then its
two consecutive words 2q, 2q + 1 (physical columns 16 q .. 16 q + 15) in the layout as it is, one 8-byte read a row;
each word's four decoded pairs are, in order, (kb, s) = (2 wi, 0), (2 wi, 1), (2 wi + 1, 0), (2 wi + 1, 1) of word
wi. Both words lie in one 32-column scale block, so a row takes one scale a step. The activations take the same
permutation: `moe_gather_permuted.gather_permuted_rows` writes each tile's rows (gathered through the alignment, in
`sorted_ids` order) with the columns of every 64-column step in logical order, so that TMA copies plain [rows, 64]
boxes.

Each K step's activations [TOK, 64] and packed weights [128 rows, 32 bytes] come by TMA into a ring of stages of one or
two steps (one mbarrier a stage: two steps a stage halve a step's waits, the CTA barriers Gluon puts before each copy's
issue and the copies' address work; at gpt-oss-20b's T = 256 Nsight Compute found the loop issuing on 59% of its cycles,
with 115 of a step's 250 instructions not the decode; docs/benchmarks.md, 2026-11-30 eleventh session). The weights
come in boxes of one step (32 bytes a row) or, as the host's descriptor says, of a whole stage of two (64 bytes a
row: half the row requests, each a whole 64-byte run of the row; their 16-byte chunks swizzled with the row so that a
step's word loads stay free of bank conflicts; gpt-oss-20b's layer 4-5% faster at T = 256-512 on the H200, 2026-11-30
thirteenth session). Each thread reads its two words a row from shared memory (`_smem_words`) and decodes them with
the engine's PTX
(`MXFP4_PAIRS_TO_BF16_PTX_TEXT`, the weights times 2^-64) into the fragment's registers. Each step's wgmma is waited for
before the next step's decode: the decode would otherwise overwrite registers the wgmma in flight still reads (the
finding of `scripts/probes/gluon_mxfp4_probe.py`). A loop that decoded step j + 1 into other registers while step j's
wgmma ran (keeping the in-flight operand alive through the wait's deps) gave wrong outputs and ran 7-20% slower on the
H200, and was removed (docs/benchmarks.md, 2026-11-30 eighth session).
"""

from __future__ import annotations

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

    from quickmoe.kernels.moe_tiles import MXFP4_PAIRS_ACC_SCALE, MXFP4_PAIRS_TO_BF16_PTX_TEXT
except ImportError:  # pragma: no cover - a triton without Gluon
    gluon = None

__all__ = ["ACC_SCALE", "PACKED_BYTES_LAYOUT", "dup3", "k_loop", "packed_bytes_layout"]

if gluon is not None:
    # the engine's decode, over 8 copies of the word ($4 .. $11) and 8 of its scale byte ($12 .. $19): one call's
    # output is the word's 8 values, its 4 bf16x2 registers $0 .. $3 in the order of the word's pairs
    _PTX = gl.constexpr(MXFP4_PAIRS_TO_BF16_PTX_TEXT.replace("$5", "$12"))
    _CONSTRAINTS = gl.constexpr("=r,=r,=r,=r," + ",".join(["r"] * 16))
    ACC_SCALE = gl.constexpr(MXFP4_PAIRS_ACC_SCALE)
    PACKED_BYTES_LAYOUT = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=8, rank=2)

    def packed_bytes_layout(steps_per_stage: int):
        """The shared layout of a pipeline stage's packed-weight box [rows, 32 x steps_per_stage bytes] (the host's
        TMA descriptor and the kernel's buffers agree on it). A stage of several steps takes its rows' bytes in one
        box, their 16-byte chunks swizzled with the row over the row's width, so that a warp's 8-byte word loads of
        one step (8 rows, 32 bytes each) still fall on distinct banks (unswizzled, rows 64 or 128 bytes apart put
        rows g and g + 2 or g + 1 on the same banks: two or four times the wavefronts)."""
        if steps_per_stage == 1:
            return PACKED_BYTES_LAYOUT
        return gl.NVMMASharedLayout(swizzle_byte_width=32 * steps_per_stage, element_bitwidth=8, rank=2)

    @gluon.jit
    def dup3(x):
        """x [...] -> [..., 2, 2, 2], every element x's (the registers repeated)."""
        x = gl.join(x, x)
        x = gl.join(x, x)
        return gl.join(x, x)

    @gluon.jit
    def _scales(s_ptr, s_off, row_ok, q_block, j, NB: gl.constexpr, N: gl.constexpr):
        """Step j's scale bytes of a thread's rows (int32 [4, 8, 4, 2, 2]: warp, g, q, m block, row g / g + 8; both
        words of a row lie in one 32-column block, q_block of the step's two); zeros past the last of the NB blocks
        (a ragged last step's second block, and the steps past the last) and past the last row. A zero scale byte
        decodes to a finite factor, which multiplies the zeros TMA reads past K."""
        return gl.load(s_ptr + s_off + j * 2 * N, mask=row_ok & (2 * j + q_block < NB), other=0).to(gl.int32)

    @gluon.jit
    def _decode(words, scales, DOT_A: gl.constexpr):
        """A step's words and scales -> wgmma's A operand [128 weight rows, 64 logical columns] (bf16 x 2^-64)."""
        w8 = dup3(words)  # [4, 8, 4, 2, 2, 2, 2, 2, 2]
        s8 = dup3(gl.broadcast(gl.expand_dims(scales, 5), words)[0])
        value = gl.inline_asm_elementwise(_PTX, _CONSTRAINTS, [w8, s8], dtype=gl.bfloat16, is_pure=True,
                                          pack=8)
        # dims (w, g, q, mb, i, wi, kb_lo, s, h): row 64 mb + 16 w + 8 i + g, column 16 (2 wi + kb_lo) + 8 s + 2 q + h
        value = gl.permute(value, (3, 0, 4, 1, 5, 6, 7, 2, 8))  # (mb, w, i, g, wi, kb_lo, s, q, h)
        return gl.convert_layout(gl.reshape(value, (128, 64)), DOT_A)

    @gluon.jit
    def _scale_offsets(expert, n0, up0, K: gl.constexpr, N: gl.constexpr, L5: gl.constexpr):
        """(Where step 0's scale bytes of a thread's rows lie in the scales [E, K/32, N], int64 [4, 8, 4, 2, 2]: warp
        w, lane (g, q), m block mb, i: row n0 + up0 mb + 16 w + 8 i + g; lane q's columns 16 q .. 16 q + 15 of a
        step lie in its 32-column block q // 2. Whether the row is one of the N, [4, 8, 1, 2, 2]; q // 2,
        [1, 1, 4, 1, 1].)"""
        w_ = gl.arange(0, 4, layout=gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, gl.SliceLayout(4, L5)))))
        g_ = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(2, gl.SliceLayout(3, gl.SliceLayout(4, L5)))))
        q_ = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(3, gl.SliceLayout(4, L5)))))
        mb_ = gl.arange(0, 2, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(4, L5)))))
        i_ = gl.arange(0, 2, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, L5)))))
        row = (gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(w_, 1), 2), 3), 4) * 16
               + gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(g_, 0), 2), 3), 4)
               + gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(mb_, 0), 1), 2), 4) * up0
               + gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(i_, 0), 1), 2), 3) * 8)  # [4,8,1,2,2]
        q5 = gl.expand_dims(gl.expand_dims(gl.expand_dims(gl.expand_dims(q_, 0), 1), 3), 4)  # [1, 1, 4, 1, 1]
        return expert * (K // 32) * N + (q5 // 2) * N + n0 + row, n0 + row < N, q5 // 2

    @gluon.jit
    def _smem_words(w_smem, h: gl.constexpr, WB: gl.constexpr, L6: gl.constexpr):
        """Step h's packed weights [128 rows, 32 bytes] of a weight box [128 rows, 32 WB bytes] (WB steps) in shared
        memory -> a thread's words, int32 [4, 8, 4, 2, 2, 2]: warp w, lane (g, q), m block mb, i, word wi: word
        2 q + wi of row 64 mb + 16 w + 8 i + g (8 bytes a row from one shared-memory load)."""
        # [128 rows, 8 words]: registers (word 2q / 2q + 1, row + 8, row + 64), lanes (q, g), warps (row + 16 w)
        LW: gl.constexpr = gl.DistributedLinearLayout(reg_bases=[[0, 1], [8, 0], [64, 0]],
                                                      lane_bases=[[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]],
                                                      warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[128, 8])
        if WB == 1:
            plain: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[1, 0])
            words = w_smem._reinterpret(gl.int32, [128, 8], plain).load(LW)
        else:
            wide: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=32 * WB, element_bitwidth=32, rank=2)
            words = w_smem._reinterpret(gl.int32, [128, 8 * WB], wide).slice(8 * h, 8, dim=1).load(LW)
        words = gl.permute(gl.reshape(words, (2, 4, 2, 8, 4, 2)), (1, 3, 4, 0, 2, 5))  # (w, g, q, mb, i, wi)
        return gl.convert_layout(words, L6)

    @gluon.jit
    def _load_stage(x_desc, w_desc, x_smem, w_smem, ready, s, js, x_row, w_row0, up0, stage_bytes: gl.constexpr,
                    pred, TWO_BOXES: gl.constexpr, SUB: gl.constexpr, WB: gl.constexpr):
        """Stage js's SUB K steps (steps SUB js .. SUB js + SUB - 1) by TMA into its buffers, all on stage s's
        mbarrier, if pred: each step's activations [TOK, 64] (buffers SUB s ..), and the packed weights in boxes of
        WB steps, 32 WB bytes a row (buffers SUB / WB s ..): rows w_row0 .. w_row0 + 127, or (TWO_BOXES) rows
        w_row0 .. and w_row0 + up0 .. as two boxes of 64 rows."""
        NB: gl.constexpr = SUB // WB
        mbarrier.expect(ready.index(s), stage_bytes, pred=pred)
        for h in gl.static_range(SUB):
            tma.async_copy_global_to_shared(x_desc, [x_row, (js * SUB + h) * 64], ready.index(s),
                                            x_smem.index(s * SUB + h), pred=pred)
        for b in gl.static_range(NB):
            column = (js * SUB + b * WB) * 32
            if TWO_BOXES:
                tma.async_copy_global_to_shared(w_desc, [w_row0, column], ready.index(s),
                                                w_smem.index(s * NB + b).slice(0, 64), pred=pred)
                tma.async_copy_global_to_shared(w_desc, [w_row0 + up0, column], ready.index(s),
                                                w_smem.index(s * NB + b).slice(64, 64), pred=pred)
            else:
                tma.async_copy_global_to_shared(w_desc, [w_row0, column], ready.index(s), w_smem.index(s * NB + b),
                                                pred=pred)

    @gluon.jit
    def k_loop(x_desc, w_desc, s_ptr, expert, x_row, n0, up0, K: gl.constexpr, N: gl.constexpr, TOK: gl.constexpr,
               STAGES: gl.constexpr, TWO_BOXES: gl.constexpr, SUB: gl.constexpr = 1):
        """The float32 sums [128 weight rows, TOK] of TOK rows of the permuted activations from x_row times 128 rows
        of expert `expert`'s weights [N, K] (x 2^-64: the decode's factor): rows n0 .. n0 + 63 and n0 + up0 ..
        n0 + up0 + 63 (GEMM 1: a gate/up group's gate rows and its up rows, which start `size` rows after them;
        GEMM 2: up0 = 64, 128 rows in a run). Each K step's activations [TOK, 64] and packed weights [128, 32 bytes]
        come by TMA into a ring of STAGES stages of SUB steps each (one mbarrier a stage: SUB = 2 halves the waits,
        the barriers and the copies' issue a step), the weights in boxes of w_desc's width: 32 bytes a row (a box a
        step) or 32 SUB (a box a stage, `packed_bytes_layout`'s swizzle); as one box of 128 rows (up0 = 64) or,
        where up0 < 64, as TWO_BOXES of 64 (w_desc's then; one box where it can: two cost 5-7% at TP = 1 on the
        H200, 2026-11-30 eighth session). Weight rows past the expert's N are another expert's or zeros, never
        stored. The scales come by pointer, two steps ahead. K need not be a multiple of 64 (nor of SUB x 64): TMA
        reads zeros past the weights' K / 2 bytes and past the activations' buffer, which holds zeros up to whole
        steps (`moe_gather_permuted.padded_width`), and the scales past K are a finite factor."""
        nk: gl.constexpr = (K + 63) // 64
        ns: gl.constexpr = (nk + SUB - 1) // SUB  # stages of SUB steps
        WB: gl.constexpr = w_desc.block_type.shape[1] // 32  # K steps a weight box holds: 1 or SUB
        NB: gl.constexpr = SUB // WB  # weight boxes a stage
        x_smem = gl.allocate_shared_memory(gl.bfloat16, [STAGES * SUB, TOK, 64], x_desc.layout)
        w_smem = gl.allocate_shared_memory(gl.uint8, [STAGES * NB, 128, 32 * WB], w_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        stage_bytes: gl.constexpr = (SUB * x_desc.block_type.nbytes
                                     + NB * (2 if TWO_BOXES else 1) * w_desc.block_type.nbytes)
        w_row0 = (expert * N + n0).to(gl.int32)  # < 2^31: the host checks E * N
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
        for i in gl.static_range(STAGES):
            _load_stage(x_desc, w_desc, x_smem, w_smem, ready, i, i, x_row, w_row0, up0, stage_bytes, i < ns,
                        TWO_BOXES, SUB, WB)
        L6: gl.constexpr = gl.BlockedLayout([1, 1, 1, 2, 2, 2], [1, 8, 4, 1, 1, 1], [4, 1, 1, 1, 1, 1],
                                            [5, 4, 3, 2, 1, 0])  # a thread's words (see _smem_words)
        s_off, row_ok, q_block = _scale_offsets(expert, n0, up0, K, N, gl.SliceLayout(5, L6))
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, TOK, 16])
        DOT_A: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
        s1 = _scales(s_ptr, s_off, row_ok, q_block, 0, K // 32, N)
        s2 = _scales(s_ptr, s_off, row_ok, q_block, 1, K // 32, N)
        acc = gl.zeros((128, TOK), dtype=gl.float32, layout=mma)
        for js in range(ns):
            s = js % STAGES
            mbarrier.wait(ready.index(s), (js // STAGES) & 1)
            for h in gl.static_range(SUB):
                s3 = _scales(s_ptr, s_off, row_ok, q_block, js * SUB + h + 2, K // 32, N)
                a = _decode(_smem_words(w_smem.index(s * NB + h // WB), h % WB, WB, L6), s1, DOT_A)
                acc = warpgroup_mma(a, x_smem.index(s * SUB + h).permute((1, 0)), acc, is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))  # the buffers and a's registers are free
                s1, s2 = s2, s3
            _load_stage(x_desc, w_desc, x_smem, w_smem, ready, s, js + STAGES, x_row, w_row0, up0, stage_bytes,
                        js + STAGES < ns, TWO_BOXES, SUB, WB)  # stage js's buffers, its wgmmas done, take js + STAGES
        for i in gl.static_range(STAGES):
            mbarrier.invalidate(ready.index(i))
        return acc
