"""Decode-sized MoE GEMMs of MXFP4 experts by warp-level mma.sync (Hopper, Gluon), tried for issue 15 and not taken
into the engine: each warp streams its own weight rows from global memory into its registers, decodes them straight
into mma's A fragments and multiplies them with up to 8 assignment rows; no shared memory, no barrier, no TMA. The
probes beside it (`moe_sync_probe.py`, `moe_sync_ncu_probe.py`) time and profile it against the engine's tiles.

**What was found** (docs/benchmarks.md, 2026-11-30 fourteenth session): 2.3-2.5 instructions a weight in the K loop
against the Triton 8-row tile's 3.0, yet gpt-oss-20b's GEMMs at T = 1 took the same time (GEMM 1 15.2-16.5 us
against 16.3-16.6) and 5-25% longer at T = 2, 8 and 16; only T = 4 was 6-10% faster with loads one step ahead.
Nsight Compute at T = 1: the warps wait on global memory (long scoreboard 3.4-4.2 cycles an issued instruction,
2.6 warps a scheduler, DRAM at 40% of its peak), as the Triton tile does at the same rate with 42% more instructions.
Loads two or three steps ahead and K in 2-5 parts (more warps, each program's float32 sums added by the tile's last
program) did not move it, nor did the probe's twins: no decode at all (`ablate`: the words' bits to the same mmas),
GEMM 2 on a pre-tiled copy of its words (`tile_words`: each 16-row block's step one contiguous run) and 128-column
chunks (`wide`: 16-byte word loads).

**Why.** At T = 1-8 an expert gets one or two assignments, so a GEMM reads each weight once and the tensor cores are
nearly idle: what bounds the tiles is the instructions each weight costs and how many loads are in flight. The
Triton 8-row tile spends 3.0 instructions a weight (the decode 1.9, operand moves 0.4, scale bytes through shared
memory; docs/benchmarks.md, 2026-11-29 third session) and the wgmma register kernels (`moe_gemm_register`) wait on
TMA and on each step's wgmma. Here a lane's fragment values are words it loads itself, and nothing is moved.

**Which words a lane needs** (the same column order as `moe_register_k_loop`'s). In a 16 x 16 k block of mma's A
operand lane (g, q) holds rows g and g + 8, columns 2q, 2q + 1 and 2q + 8, 2q + 9. The GEMM sums over k in any order
both operands share, so a 64-column chunk's *logical* column 16 kb + 8 s + 2 q + h multiplies the *physical* column
16 q + 4 kb + 2 s + h (`moe_gather_permuted.PHYSICAL_COLUMN`): lane q's values of a row in a chunk are the row's
words 2q and 2q + 1 as stored (one 8-byte load; both in one 32-column scale block), and each word's four decoded
pairs are, in order, its fragment registers of k blocks 2 wi, 2 wi + 1 (wi: the word). mma's B operand (the
activations, lane (g, q): assignment row g) then holds, in its registers of a chunk, that row's physical columns
16 q .. 16 q + 15 in their own order: two 16-byte loads, no permutation of the activations at all.

**Rows.** A program takes one M tile of 8 assignment rows (the alignment's `block_m` 8: one expert's) and
16 x NW x MT weight rows (NW warps of MT m-tiles of 16). Warp w's m-tile m holds rows 16 (NW m + w) .. + 15 of the
program's block. GEMM 1 pairs them for the SwiGLU: row g of an m-tile is a gate row and row g + 8 the up row of the
same intermediate column (wgmma's and mma's accumulators hold rows g and g + 8 in one thread), so a program covers
8 NW MT intermediate columns of one gate/up group of 64 (gate rows 128 group + c, up rows `size` further; a ragged
last group, as a rank's at tensor parallel 2, has size < 64). GEMM 2 takes 16 NW MT output columns of w2 [E, H, I/2].

**The K loop.** A loop step covers KB chunks of 64 columns and loads the words and scales DEPTH steps ahead, into
one of four register buffers, before decoding its own (the loop unrolled four steps, so no buffer is moved at the
back edge); the activations are loaded in the step that uses them (L2 hits). Only a last, partial step masks its
loads. With K in SPLIT parts each program walks one part, stores its float32 sums, and the tile's last program (a
ticket, `kernels/tickets.py`'s protocol) adds them in part order and runs the epilogue.

Gluon has no CPU interpreter; the torch references are `moe_gemm_register`'s (`moe_gemm1_swiglu_register_ref`,
`moe_gemm2_register_ref`: the same arguments and results), against which `moe_sync_probe.py` checks every output.
"""

from __future__ import annotations

import torch

from quickmoe.errors import ConfigError
from quickmoe.kernels.moe_align import MoEAlignment
from quickmoe.kernels.moe_gather_permuted import STEP
from quickmoe.kernels.pdl import pdl_kwargs
from quickmoe.kernels.tickets import MAX_TICKETS, ticket_counters

try:  # CPU installs without triton keep the torch references
    import triton
except ImportError:  # pragma: no cover
    triton = None

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import mma_v2

    from quickmoe.kernels.moe_register_k_loop import ACC_SCALE, dup3
    from quickmoe.kernels.moe_tiles import MXFP4_PAIRS_TO_BF16_PTX_TEXT
except ImportError:  # pragma: no cover - a triton without Gluon
    gluon = None

__all__ = ["SYNC_ROWS", "moe_gemm1_swiglu_sync", "moe_gemm2_sync", "sync_problem"]

SYNC_ROWS = 8  # the assignment rows of a tile (mma's N side)


def sync_problem(acts: torch.Tensor, w: torch.Tensor, w_scales: torch.Tensor | None, block_m: int, *,
                 group: int | None = None, activation: str | None = None) -> str:
    """What these kernels need that the operands lack ('' when they can run): as `register_operand_problem`, but
    tiles of 8 rows only (mma's N side)."""
    from quickmoe.kernels.moe_gemm_register import register_operand_problem

    if block_m != SYNC_ROWS:
        return f"tiles of {SYNC_ROWS} rows"
    return register_operand_problem(acts, w, w_scales, None, block_m, 1, group=group, activation=activation)


def _check(acts, w, w_scales, align, gemm: str, **kwargs) -> None:
    problem = sync_problem(acts, w, w_scales, align.block_m, **kwargs)
    if problem:
        raise ConfigError(f"{gemm} by warp-level mma.sync (this probe's kernels) needs {problem}; got {acts.dtype} "
                          f"activations on {acts.device}, w {w.dtype} {tuple(w.shape)}, block_m {align.block_m}")


def _check_shape(warps: int, m_tiles: int, k_chunks: int, depth: int) -> None:
    if (warps not in (1, 2, 4, 8) or m_tiles not in (1, 2, 4) or k_chunks not in (1, 2, 4, 8) or warps * m_tiles > 8
            or depth not in (1, 2, 3)):
        raise ConfigError(f"mma.sync MoE GEMM: warps {warps}, m_tiles {m_tiles}, k_chunks {k_chunks}, depth {depth}; "
                          "expected warps of 1, 2, 4 or 8, m_tiles of 1, 2 or 4 (at most 8 m-tiles of 16 rows a "
                          "program: GEMM 1's columns within a gate/up group of 64), k_chunks of 1, 2, 4 or 8 and a "
                          "prefetch depth of 1, 2 or 3 steps")


def _parts_workspace(split: int, tiles: int, rows: int, k: int, device: torch.device, name: str) -> tuple:
    """K in `split` parts: (float32 partial sums [tiles x split x rows x 8], the kernel's ticket counters); K must
    split into whole 32-column scale blocks. One part: two placeholders (unused)."""
    if k % (32 * split):
        raise ConfigError(f"mma.sync MoE GEMM: K = {k} in {split} parts; expected parts of whole 32-column blocks")
    if split == 1:
        return torch.empty(0, dtype=torch.float32, device=device), torch.empty(0, dtype=torch.int32, device=device)
    if tiles > MAX_TICKETS:
        raise ConfigError(f"mma.sync MoE GEMM: {tiles} tiles in parts; at most {MAX_TICKETS} (the ticket counters)")
    partials = torch.empty(tiles * split * rows * 8, dtype=torch.float32, device=device)
    return partials, ticket_counters(device, name)


def tile_words(w: torch.Tensor, k_chunks: int) -> torch.Tensor:
    """The probe's pre-tiled copy of packed weights w [E, N, K/2] (N a multiple of 16) for `moe_gemm2_sync(...,
    tiled_words=)`: int32 [E, N/16, steps, 16, 8 k_chunks], each 16-row block's step of 64 k_chunks columns one
    contiguous run, zeros past K."""
    experts, n, half_k = w.shape
    words = w.contiguous().view(torch.int32)  # [E, N, K/8]
    step = 8 * k_chunks
    steps = -(-words.shape[2] // step)
    padded = torch.nn.functional.pad(words, (0, steps * step - words.shape[2]))
    return padded.reshape(experts, n // 16, 16, steps, step).permute(0, 1, 3, 2, 4).contiguous()


def moe_gemm1_swiglu_sync(acts: torch.Tensor, align: MoEAlignment, top_k: int, w1: torch.Tensor,
                          w1_bias: torch.Tensor | None, w1_scales: torch.Tensor, group: int, limit: float,
                          alpha: float, warps: int = 4, m_tiles: int = 1, k_chunks: int = 4, depth: int = 1,
                          split: int = 1, maxnreg: int | None = None, ablate: bool = False,
                          wide: bool = False) -> torch.Tensor:
    """acts [T, H] bf16, MXFP4 w1 [E, 2I, H/2] (gate/up groups of 64) with scales [E, H/32, 2I] -> inter [A, I]
    (as `moe_gemm.moe_gemm1_swiglu` with gpt-oss's SwiGLU) on an alignment of 8-row tiles; `warps` warps of
    `m_tiles` m-tiles a program, `k_chunks` chunks of 64 columns a loop step."""
    _check(acts, w1, w1_scales, align, "GEMM 1", group=group, activation="swiglu_gpt_oss")
    _check_shape(warps, m_tiles, k_chunks, depth)
    hidden, intermediate = acts.shape[1], w1.shape[1] // 2
    inter = torch.empty(align.num_assignments, intermediate, dtype=acts.dtype, device=acts.device)
    if align.sorted_ids.numel() == 0:
        return inter
    columns = 8 * warps * m_tiles  # intermediate columns a program
    num_m = align.block_expert.numel()
    tiles = num_m * triton.cdiv(intermediate, STEP) * (STEP // columns)
    partials, counters = _parts_workspace(split, tiles, 16 * warps * m_tiles, hidden, acts.device, "moe_gemm1_sync")
    _gemm1_sync_kernel[(tiles, split)](
        acts, w1.view(torch.int32), w1_scales, w1_bias if w1_bias is not None else w1, inter, partials, counters,
        align.sorted_ids, align.block_expert, align.num_padded, align.num_assignments, num_m, top_k, acts.stride(0),
        float(limit), float(alpha), H=hidden, I=intermediate, NW=warps, MT=m_tiles, KB=k_chunks, DEPTH=depth,
        SPLIT=split, HAS_BIAS=w1_bias is not None, num_warps=warps, maxnreg=maxnreg, ABLATE=ablate, WIDE=wide,
        **pdl_kwargs(acts.device))
    return inter


def moe_gemm2_sync(acts: torch.Tensor, align: MoEAlignment, topk_weights: torch.Tensor, w2: torch.Tensor,
                   w2_bias: torch.Tensor | None, w2_scales: torch.Tensor, warps: int = 4, m_tiles: int = 1,
                   k_chunks: int = 4, depth: int = 1, split: int = 1, maxnreg: int | None = None,
                   ablate: bool = False, tiled_words: torch.Tensor | None = None, wide: bool = False) -> torch.Tensor:
    """inter [A, I] bf16 (row a: assignment a), MXFP4 w2 [E, H, I/2] with scales [E, I/32, H] -> [A, H] (as
    `moe_gemm.moe_gemm2`) on an alignment of 8-row tiles."""
    _check(acts, w2, w2_scales, align, "GEMM 2")
    _check_shape(warps, m_tiles, k_chunks, depth)
    hidden, intermediate = w2.shape[1], 2 * w2.shape[2]
    out = torch.empty(align.num_assignments, hidden, dtype=acts.dtype, device=acts.device)
    if align.sorted_ids.numel() == 0:
        return out
    rows = 16 * warps * m_tiles
    num_m = align.block_expert.numel()
    tiles = num_m * triton.cdiv(hidden, rows)
    partials, counters = _parts_workspace(split, tiles, rows, intermediate, acts.device, "moe_gemm2_sync")
    _gemm2_sync_kernel[(tiles, split)](
        acts, w2.view(torch.int32) if tiled_words is None else tiled_words, w2_scales,
        w2_bias if w2_bias is not None else w2, topk_weights.reshape(-1), out,
        partials, counters, align.sorted_ids, align.block_expert, align.num_padded, align.num_assignments, num_m,
        acts.stride(0), H=hidden, I=intermediate, NW=warps, MT=m_tiles, KB=k_chunks, DEPTH=depth, SPLIT=split,
        HAS_BIAS=w2_bias is not None, num_warps=warps, maxnreg=maxnreg, ABLATE=ablate, TILED=tiled_words is not None,
        WIDE=wide,
        **pdl_kwargs(acts.device))
    return out


if gluon is not None:
    # the engine's decode over 8 copies of a word ($4 .. $11) and of its scale byte ($12 .. $19) -> the word's 8
    # values, bf16 x 2^-64, its 4 bf16x2 registers in the order of its pairs
    _PTX = gl.constexpr(MXFP4_PAIRS_TO_BF16_PTX_TEXT.replace("$5", "$12"))
    _CONSTRAINTS = gl.constexpr("=r,=r,=r,=r," + ",".join(["r"] * 16))
    # the probe's ablation: the word's bits (xor its scale) in the four registers, no decode
    _NO_DECODE_PTX = gl.constexpr("xor.b32 $0, $4, $12; mov.b32 $1, $5; mov.b32 $2, $6; mov.b32 $3, $7;")

    @gluon.constexpr_function
    def _words_layout(NW, MT, KB, WIDE=False):
        """A program's words of a loop step, int32 [16 NW MT rows, 8 KB]: row 16 (NW m + w) + 8 i + g (warp w,
        lane (g, q), m-tile m, half i), word 8 c + 2 q + wi (chunk c, word wi: physical columns 64 c + 16 q + 8 wi
        .. + 7). A thread's registers: wi first (its two words of a chunk are one 8-byte load), then i, c, m. WIDE:
        chunks of 128 columns, word 16 c + 4 q + wi (four words a lane, one 16-byte load: a warp's load covers
        whole 64-byte runs of 8 rows)."""
        if WIDE:
            regs = [[0, 1], [0, 2], [8, 0]] + [[0, 16 << b] for b in range(KB.bit_length() - 2)]
            lanes = [[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]]
        else:
            regs = [[0, 1], [8, 0]] + [[0, 8 << b] for b in range(KB.bit_length() - 1)]
            lanes = [[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]]
        regs = regs + [[16 * NW << b, 0] for b in range(MT.bit_length() - 1)]
        return gl.DistributedLinearLayout(reg_bases=regs, lane_bases=lanes,
                                          warp_bases=[[16 << b, 0] for b in range(NW.bit_length() - 1)], block_bases=[],
                                          shape=[16 * NW * MT, 8 * KB])

    @gluon.constexpr_function
    def _acts_layout(NW, KB, WIDE=False):
        """A program's activations of a loop step, bf16 [8 rows, 64 KB physical columns]: lane (g, q) holds row g's
        columns 64 c + 16 q .. + 15 of every chunk c (two 16-byte loads a chunk); every warp the same (mma's B
        operand is the whole tile in each warp). WIDE: columns 128 c + 32 q .. + 31 of chunks of 128."""
        if WIDE:
            regs = [[0, 1 << b] for b in range(5)] + [[0, 128 << b] for b in range(KB.bit_length() - 2)]
            lanes = [[0, 32], [0, 64], [1, 0], [2, 0], [4, 0]]
        else:
            regs = [[0, 1 << b] for b in range(4)] + [[0, 64 << b] for b in range(KB.bit_length() - 1)]
            lanes = [[0, 16], [0, 32], [1, 0], [2, 0], [4, 0]]
        return gl.DistributedLinearLayout(reg_bases=regs, lane_bases=lanes,
                                          warp_bases=[[0, 0] for _ in range(NW.bit_length() - 1)], block_bases=[],
                                          shape=[8, 64 * KB])

    @gluon.jit
    def _decode(words, scales, R: gl.constexpr, KB: gl.constexpr, DOT_A: gl.constexpr, ABLATE: gl.constexpr = False,
                WIDE: gl.constexpr = False):
        """A loop step's words [R, 8 KB] and their scale bytes ([R, 2 KB, 1] int32, one a 32-column block) ->
        mma's A operand [R, 64 KB] (bf16 x 2^-64) in the logical column order."""
        w3 = gl.reshape(words, (R, 2 * KB, 4))  # (row, block, word in the block)
        s3 = gl.broadcast(scales, w3)[0]
        value = gl.inline_asm_elementwise(_NO_DECODE_PTX if ABLATE else _PTX, _CONSTRAINTS, [dup3(w3), dup3(s3)],
                                          dtype=gl.bfloat16, is_pure=True, pack=8)  # (row, block, word, kb_lo, s, h)
        # word 8 c + 2 q + wi, pair 2 kb_lo + s -> logical column 64 c + 16 (2 wi + kb_lo) + 8 s + 2 q + h
        if WIDE:  # word 16 c + 4 q + wi: logical column 128 c + 16 (2 wi + kb_lo) + 8 s + 2 q + h
            value = gl.reshape(value, (R, KB // 2, 4, 4, 2, 2, 2))  # (row, c, q, wi, kb_lo, s, h)
        else:
            value = gl.reshape(value, (R, KB, 4, 2, 2, 2, 2))  # (row, c, q, wi, kb_lo, s, h)
        value = gl.permute(value, (0, 1, 3, 4, 5, 2, 6))  # (row, c, wi, kb_lo, s, q, h)
        return gl.convert_layout(gl.reshape(value, (R, 64 * KB)), DOT_A)

    @gluon.jit
    def _b_operand(acts, KB: gl.constexpr, DOT_B: gl.constexpr, WIDE: gl.constexpr = False):
        """Activations [8, 64 KB] (row g, physical column 64 c + 16 q + 4 kb + 2 s + h) -> mma's B operand
        [64 KB logical columns (64 c + 16 kb + 8 s + 2 q + h), 8 rows]."""
        if WIDE:  # physical column 128 c + 32 q + 4 kb + 2 s + h, kb < 8
            value = gl.reshape(acts, (8, KB // 2, 4, 8, 2, 2))  # (g, c, q, kb, s, h)
        else:
            value = gl.reshape(acts, (8, KB, 4, 4, 2, 2))  # (g, c, q, kb, s, h)
        value = gl.permute(value, (1, 3, 4, 2, 5, 0))  # (c, kb, s, q, h, g)
        return gl.convert_layout(gl.reshape(value, (64 * KB, 8)), DOT_B)

    @gluon.jit
    def _load_words(w_ptr, s_ptr, w_base, s_base, k0, wblk, sblk, K: gl.constexpr, N: gl.constexpr,
                    MASKED: gl.constexpr, TILED: gl.constexpr = False):
        """Loop step k0's words (int32) and scale bytes (int32); MASKED: zeros past K (the last, partial step).
        TILED (the probe's pre-tiled copy of the words: each 16-row block's step of 64 KB columns one contiguous
        2 KB x KB run, zeros past K): a step is 2 k0 words further, not k0 / 8."""
        offset = k0 * 2 if TILED else k0 // 8
        if MASKED:
            words = gl.load(w_ptr + w_base + offset, mask=k0 + wblk < K, other=0)
            scales = gl.load(s_ptr + s_base + (k0 // 32) * N, mask=k0 + sblk * 32 < K, other=0)
        else:
            words = gl.load(w_ptr + w_base + offset)
            scales = gl.load(s_ptr + s_base + (k0 // 32) * N)
        return words, scales.to(gl.int32)

    @gluon.jit
    def _load_acts(x_ptr, x_base, k0, xblk, K: gl.constexpr, MASKED: gl.constexpr):
        """Loop step k0's activations (bf16); MASKED: zeros past K."""
        if MASKED:
            return gl.load(x_ptr + x_base + k0, mask=k0 + xblk < K, other=0.0)
        else:
            return gl.load(x_ptr + x_base + k0)

    @gluon.jit
    def _put(i: gl.constexpr, w, sc, w0, s0, w1, s1, w2, s2, w3, s3):
        """The four buffers with buffer i replaced by (w, sc)."""
        if i == 0:
            w0, s0 = w, sc
        elif i == 1:
            w1, s1 = w, sc
        elif i == 2:
            w2, s2 = w, sc
        else:
            w3, s3 = w, sc
        return w0, s0, w1, s1, w2, s2, w3, s3

    @gluon.jit
    def _get(i: gl.constexpr, w0, s0, w1, s1, w2, s2, w3, s3):
        """Buffer i of the four."""
        if i == 0:
            return w0, s0
        elif i == 1:
            return w1, s1
        elif i == 2:
            return w2, s2
        else:
            return w3, s3

    @gluon.jit
    def _multiply(acc, words, scales, acts, R: gl.constexpr, KB: gl.constexpr, DOT_A: gl.constexpr,
                  DOT_B: gl.constexpr, ABLATE: gl.constexpr = False, WIDE: gl.constexpr = False):
        """acc + a loop step's decoded words times its activations. ABLATE (a probe's bound, wrong results): the
        words' bits (one xor with the scale) in place of the decode, the same loads and mmas."""
        a = _decode(words, gl.expand_dims(scales, 2), R, KB, DOT_A, ABLATE, WIDE)
        return mma_v2(a, _b_operand(acts, KB, DOT_B, WIDE), acc)

    @gluon.jit
    def _k_loop(x_ptr, w_ptr, s_ptr, x_row, stride_x, expert, prow, k_lo, K: gl.constexpr, KP: gl.constexpr,
                N: gl.constexpr, NW: gl.constexpr, MT: gl.constexpr, KB: gl.constexpr, DEPTH: gl.constexpr,
                ABLATE: gl.constexpr = False, TILED: gl.constexpr = False, WIDE: gl.constexpr = False):
        """The float32 sums [16 NW MT, 8] (x 2^-64, mma's accumulator layout) of the program's weight rows times
        its 8 activation rows. prow [R] (SliceLayout(1) of the words' layout): each logical row's physical row of
        expert `expert`'s [N, K/2] weights, a valid one (rows whose outputs are masked may repeat another's);
        x_row [8]: each tile row's activation row (a valid one: a sentinel's repeats another's, its outputs are
        never stored). Columns k_lo .. k_lo + KP - 1 of the K (k_lo and KP multiples of 32: whole scale blocks).
        The steps of 64 KB columns load the words and scales DEPTH steps ahead before decoding their own; only a
        last, partial step masks its loads."""
        R: gl.constexpr = 16 * NW * MT
        STEP_K: gl.constexpr = 64 * KB
        FULL: gl.constexpr = KP // STEP_K  # whole steps
        LW: gl.constexpr = _words_layout(NW, MT, KB, WIDE)
        LX: gl.constexpr = _acts_layout(NW, KB, WIDE)
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[NW, 1], instr_shape=[16, 8])
        DOT_A: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
        DOT_B: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=2)
        # words: w_ptr as int32 [E * N, K / 8]; word 8 c + 2 q + wi of a step
        wcol = gl.expand_dims(gl.arange(0, 8 * KB, layout=gl.SliceLayout(0, LW)), 0)
        if TILED:  # k_lo = 0 (one part): [E, N / 16, steps, 16, 8 KB] words
            NST: gl.constexpr = (K + STEP_K - 1) // STEP_K
            w_base = gl.expand_dims(((expert * (N // 16) + prow // 16) * NST * 16 + prow % 16).to(gl.int64) * (8 * KB),
                                    1) + wcol
        else:
            w_base = gl.expand_dims((expert * N + prow).to(gl.int64) * (K // 8) + k_lo // 8, 1) + wcol
        wblk = (wcol // 4) * 32  # the first column of a word's 32-column block (masks constant over 16 bytes)
        # scales [E, K/32, N]: a byte a row and 32-column block, in the layout of the words' blocks
        # (the load below only names the layout of the words' reshape; its value is unused, and compiled away)
        LS: gl.constexpr = gl.SliceLayout(2, gl.reshape(gl.load(w_ptr + w_base), (R, 2 * KB, 4)).type.layout)
        sblk = gl.expand_dims(gl.arange(0, 2 * KB, layout=gl.SliceLayout(0, LS)), 0)
        s_base = (expert * (K // 32) * N + (k_lo // 32) * N + sblk * N
                  + gl.expand_dims(gl.convert_layout(prow, gl.SliceLayout(1, LS)), 1))
        # activations [T, K] bf16: row g's columns 64 c + 16 q .. + 15 in lane (g, q)
        xcol = gl.expand_dims(gl.arange(0, STEP_K, layout=gl.SliceLayout(0, LX)), 0)
        x_base = (gl.expand_dims(gl.convert_layout(x_row, gl.SliceLayout(1, LX)).to(gl.int64) * stride_x + k_lo, 1)
                  + xcol)
        RUN: gl.constexpr = 32 if WIDE else 16
        xblk = (xcol // RUN) * RUN  # masks constant over a lane's run of columns

        acc = gl.zeros((R, 8), dtype=gl.float32, layout=mma)
        # Step s loads the words of step s + DEPTH into buffer (s + DEPTH) % 4 before decoding its own, buffer s % 4:
        # four buffers, the loop unrolled four steps an iteration, so no buffer is moved at the back edge. The loop's
        # steps all load whole steps; the last steps (those whose loads reach the partial step or past the last) are
        # unrolled after it.
        NS: gl.constexpr = (KP + STEP_K - 1) // STEP_K  # steps, the last partial where KP % STEP_K
        MAIN: gl.constexpr = (FULL - DEPTH) // 4 * 4 if FULL > DEPTH else 0  # steps of the loop
        w0, s0 = _load_words(w_ptr, s_ptr, w_base, s_base, 0, wblk, sblk, KP, N, FULL == 0, TILED)
        w1, s1, w2, s2, w3, s3 = w0, s0, w0, s0, w0, s0
        for st in gl.static_range(1, DEPTH):
            if st < NS:
                w, sc = _load_words(w_ptr, s_ptr, w_base, s_base, st * STEP_K, wblk, sblk, KP, N, st == FULL, TILED)
                w0, s0, w1, s1, w2, s2, w3, s3 = _put(st % 4, w, sc, w0, s0, w1, s1, w2, s2, w3, s3)
        for it in range(MAIN // 4):
            for b in gl.static_range(4):
                k0 = (it * 4 + b) * STEP_K
                acts = _load_acts(x_ptr, x_base, k0, xblk, KP, False)
                w, sc = _load_words(w_ptr, s_ptr, w_base, s_base, k0 + DEPTH * STEP_K, wblk, sblk, KP, N, False, TILED)
                w0, s0, w1, s1, w2, s2, w3, s3 = _put((b + DEPTH) % 4, w, sc, w0, s0, w1, s1, w2, s2, w3, s3)
                w, sc = _get(b, w0, s0, w1, s1, w2, s2, w3, s3)
                acc = _multiply(acc, w, sc, acts, R, KB, DOT_A, DOT_B, ABLATE, WIDE)
        for st in gl.static_range(MAIN, NS):
            acts = _load_acts(x_ptr, x_base, st * STEP_K, xblk, KP, st == FULL)
            if st + DEPTH < NS:
                w, sc = _load_words(w_ptr, s_ptr, w_base, s_base, (st + DEPTH) * STEP_K, wblk, sblk, KP, N,
                                    st + DEPTH == FULL, TILED)
                w0, s0, w1, s1, w2, s2, w3, s3 = _put((st + DEPTH) % 4, w, sc, w0, s0, w1, s1, w2, s2, w3, s3)
            w, sc = _get(st % 4, w0, s0, w1, s1, w2, s2, w3, s3)
            acc = _multiply(acc, w, sc, acts, R, KB, DOT_A, DOT_B, ABLATE, WIDE)
        return acc

    @gluon.jit
    def _tile_rows(sorted_ids_ptr, pid_m, num_assignments, top_k, NW: gl.constexpr):
        """The tile's 8 assignments (int32 [8], the activations' row layout), whether each is one (not a
        sentinel), and its activation row (assignment // top_k; row 0 for a sentinel)."""
        LX: gl.constexpr = _acts_layout(NW, 1)
        assign = gl.load(sorted_ids_ptr + pid_m * 8 + gl.arange(0, 8, layout=gl.SliceLayout(1, LX)))
        ok = assign < num_assignments
        return assign, ok, gl.where(ok, assign // top_k, 0)

    @gluon.jit
    def _parts_sum(acc, partial_ptr, counter_ptr, tile, part, R: gl.constexpr, SPLIT: gl.constexpr):
        """K in SPLIT parts: store this program's float32 sums as slab tile x SPLIT + part, take the tile's ticket
        (`kernels/tickets.py`'s protocol); (whether this program drew the last one, and then the sum of the tile's
        SPLIT slabs from zero in part order: the same bits whichever program finished last)."""
        L: gl.constexpr = acc.type.layout
        offs = (gl.expand_dims(gl.arange(0, R, layout=gl.SliceLayout(1, L)), 1) * 8
                + gl.expand_dims(gl.arange(0, 8, layout=gl.SliceLayout(0, L)), 0))
        gl.store(partial_ptr + (tile * SPLIT + part) * (R * 8) + offs, acc)
        gl.thread_barrier()  # every thread's partial stored before the ticket
        last = gl.atomic_add(counter_ptr + tile, 1, sem="acq_rel", scope="gpu") == SPLIT - 1
        total = gl.zeros((R, 8), dtype=gl.float32, layout=L)
        if last:
            for i in gl.static_range(SPLIT):
                total += gl.load(partial_ptr + (tile * SPLIT + i) * (R * 8) + offs, cache_modifier=".cg")
            gl.atomic_xchg(counter_ptr + tile, 0, sem="relaxed", scope="gpu")
        return last, total

    @gluon.jit
    def _pdl_wait(PDL: gl.constexpr):
        if PDL:
            gl.inline_asm_elementwise("griddepcontrol.wait; // dummy $0", "=r", [], dtype=gl.int32, is_pure=False,
                                      pack=1)

    @gluon.jit
    def _gemm1_epilogue(acc, bias_ptr, out_ptr, assign, expert, group, size, c0, num_assignments, limit, alpha,
                        I: gl.constexpr, R: gl.constexpr, HAS_BIAS: gl.constexpr):
        """Bias, gpt-oss's SwiGLU and the store of GEMM 1's sums [R, 8] (x 2^-64) to inter [A, I]."""
        # rows 16 t + 8 i + g: gate (i = 0) and up (i = 1) of column 8 t + g lie in one thread
        both = gl.permute(gl.reshape(acc * ACC_SCALE, (R // 16, 2, 8, 8)), (0, 2, 3, 1))  # (t, g, tok, i)
        gate, up = gl.split(both)
        gate = gl.reshape(gate, (R // 2, 8))  # [columns, tokens]
        up = gl.reshape(up, (R // 2, 8))
        EPI: gl.constexpr = gate.type.layout
        cols = c0 + gl.arange(0, R // 2, layout=gl.SliceLayout(1, EPI))
        col_ok = cols < size
        if HAS_BIAS:
            gate += gl.expand_dims(gl.load(bias_ptr + expert * 2 * I + group * 128 + cols, mask=col_ok,
                                           other=0.0).to(gl.float32), 1)
            up += gl.expand_dims(gl.load(bias_ptr + expert * 2 * I + group * 128 + size + cols, mask=col_ok,
                                         other=0.0).to(gl.float32), 1)
        gate = gl.minimum(gate, limit)
        up = gl.minimum(gl.maximum(up, -limit), limit)
        y = (up + 1.0) * (gate / (1.0 + gl.exp(-alpha * gate)))
        a_out = gl.convert_layout(assign, gl.SliceLayout(0, EPI))
        ptrs = out_ptr + gl.expand_dims(a_out.to(gl.int64) * I, 0) + gl.expand_dims(group * 64 + cols, 1)
        gl.store(ptrs, y.to(gl.bfloat16), mask=gl.expand_dims(a_out < num_assignments, 0) & gl.expand_dims(col_ok, 1))

    @gluon.jit(do_not_specialize=["num_assignments", "num_m", "top_k"])
    def _gemm1_sync_kernel(x_ptr, w_ptr, s_ptr, bias_ptr, out_ptr, partial_ptr, counter_ptr, sorted_ids_ptr,
                           block_expert_ptr, num_padded_ptr, num_assignments, num_m, top_k, stride_x, limit, alpha,
                           H: gl.constexpr, I: gl.constexpr, NW: gl.constexpr, MT: gl.constexpr, KB: gl.constexpr,
                           DEPTH: gl.constexpr, SPLIT: gl.constexpr, HAS_BIAS: gl.constexpr, PDL: gl.constexpr,
                           num_warps: gl.constexpr, ABLATE: gl.constexpr = False, WIDE: gl.constexpr = False):
        """GEMM 1 + gpt-oss's SwiGLU of one 8-row tile and 8 NW MT intermediate columns of one gate/up group, over
        part program_id(1) of SPLIT of the K."""
        _pdl_wait(PDL)
        pid = gl.program_id(0)
        part = gl.program_id(1)
        pid_m = pid % num_m  # an expert's tiles side by side: its weights shared in L2
        CP: gl.constexpr = 8 * NW * MT  # intermediate columns a program
        block = pid // num_m
        group = block // (64 // CP)
        c0 = (block % (64 // CP)) * CP
        if pid_m * 8 < gl.load(num_padded_ptr):
            expert = gl.load(block_expert_ptr + pid_m).to(gl.int64)
            size = gl.minimum(I - group * 64, 64)  # the group's gate rows (< 64: a ragged last group)
            R: gl.constexpr = 16 * NW * MT
            LW: gl.constexpr = _words_layout(NW, MT, KB, WIDE)
            r = gl.arange(0, R, layout=gl.SliceLayout(1, LW))
            j = c0 + 8 * (r // 16) + r % 8  # the row's column of the group; rows 8 i + g: i = 0 gate, 1 up
            prow = group * 128 + gl.where(j < size, j, 0) + ((r // 8) % 2) * size  # columns past size: masked
            assign, ok, x_row = _tile_rows(sorted_ids_ptr, pid_m, num_assignments, top_k, NW)
            KP: gl.constexpr = H // SPLIT
            acc = _k_loop(x_ptr, w_ptr, s_ptr, x_row, stride_x, expert, prow, part * KP, H, KP, 2 * I, NW, MT, KB,
                          DEPTH, ABLATE, False, WIDE)
            if SPLIT == 1:
                _gemm1_epilogue(acc, bias_ptr, out_ptr, assign, expert, group, size, c0, num_assignments, limit,
                                alpha, I, R, HAS_BIAS)
            else:
                last, total = _parts_sum(acc, partial_ptr, counter_ptr, pid, part, R, SPLIT)
                if last:
                    _gemm1_epilogue(total, bias_ptr, out_ptr, assign, expert, group, size, c0, num_assignments,
                                    limit, alpha, I, R, HAS_BIAS)

    @gluon.jit
    def _gemm2_epilogue(acc, bias_ptr, route_w_ptr, out_ptr, assign, expert, n0, num_assignments, H: gl.constexpr,
                        R: gl.constexpr, HAS_BIAS: gl.constexpr):
        """Bias, routing weight and the store of GEMM 2's sums [R, 8] (x 2^-64) to [A, H]."""
        acc = acc * ACC_SCALE
        EPI: gl.constexpr = acc.type.layout
        rows = n0 + gl.arange(0, R, layout=gl.SliceLayout(1, EPI))
        row_ok = rows < H
        if HAS_BIAS:
            acc += gl.expand_dims(gl.load(bias_ptr + expert * H + rows, mask=row_ok, other=0.0).to(gl.float32), 1)
        a_out = gl.convert_layout(assign, gl.SliceLayout(0, EPI))
        a_ok = a_out < num_assignments
        acc *= gl.expand_dims(gl.load(route_w_ptr + a_out, mask=a_ok, other=0.0).to(gl.float32), 0)
        ptrs = out_ptr + gl.expand_dims(a_out.to(gl.int64) * H, 0) + gl.expand_dims(rows, 1)
        gl.store(ptrs, acc.to(gl.bfloat16), mask=gl.expand_dims(a_ok, 0) & gl.expand_dims(row_ok, 1))

    @gluon.jit(do_not_specialize=["num_assignments", "num_m"])
    def _gemm2_sync_kernel(x_ptr, w_ptr, s_ptr, bias_ptr, route_w_ptr, out_ptr, partial_ptr, counter_ptr,
                           sorted_ids_ptr, block_expert_ptr, num_padded_ptr, num_assignments, num_m, stride_x,
                           H: gl.constexpr, I: gl.constexpr, NW: gl.constexpr, MT: gl.constexpr, KB: gl.constexpr,
                           DEPTH: gl.constexpr, SPLIT: gl.constexpr, HAS_BIAS: gl.constexpr, PDL: gl.constexpr,
                           num_warps: gl.constexpr, ABLATE: gl.constexpr = False,
                           TILED: gl.constexpr = False, WIDE: gl.constexpr = False):
        """GEMM 2 of one 8-row tile and 16 NW MT output columns, over part program_id(1) of SPLIT of the K:
        (inter @ W2^T + b2) x the routing weight."""
        _pdl_wait(PDL)
        pid = gl.program_id(0)
        part = gl.program_id(1)
        pid_m = pid % num_m
        R: gl.constexpr = 16 * NW * MT
        n0 = (pid // num_m) * R
        if pid_m * 8 < gl.load(num_padded_ptr):
            expert = gl.load(block_expert_ptr + pid_m).to(gl.int64)
            LW: gl.constexpr = _words_layout(NW, MT, KB, WIDE)
            prow = n0 + gl.arange(0, R, layout=gl.SliceLayout(1, LW))
            prow = gl.where(prow < H, prow, H - 1)  # rows past H: masked
            assign, ok, x_row = _tile_rows(sorted_ids_ptr, pid_m, num_assignments, 1, NW)
            KP: gl.constexpr = I // SPLIT
            acc = _k_loop(x_ptr, w_ptr, s_ptr, x_row, stride_x, expert, prow, part * KP, I, KP, H, NW, MT, KB,
                          DEPTH, ABLATE, TILED, WIDE)
            if SPLIT == 1:
                _gemm2_epilogue(acc, bias_ptr, route_w_ptr, out_ptr, assign, expert, n0, num_assignments, H, R,
                                HAS_BIAS)
            else:
                last, total = _parts_sum(acc, partial_ptr, counter_ptr, pid, part, R, SPLIT)
                if last:
                    _gemm2_epilogue(total, bias_ptr, route_w_ptr, out_ptr, assign, expert, n0, num_assignments, H,
                                    R, HAS_BIAS)
