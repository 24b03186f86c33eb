"""The MoE GEMMs of MXFP4 experts with the decoded weights as wgmma's register operand (Hopper, Gluon).

The Triton GEMM 1 tile of decode batches of ~256 (64 assignment rows, 128 gate/up weight rows, K steps of 64)
writes each step's decoded weights to shared memory and multiplies them from there; under Nsight Compute it is
bound in L1 and shared memory (docs/benchmarks.md, 2026-11-30 fifth session). Here the decoded weights never touch
shared memory: a step's packed weights (4 KB for 128 rows) come by TMA, each thread reads from them the words that
hold exactly the values of its wgmma A fragment, decodes them (`MXFP4_PAIRS_TO_BF16_PTX_TEXT`, the engine's shifts
and masks) into the fragment's registers, and the activations are the shared-memory B operand, copied by TMA too.
(Each thread loading its words from global memory instead cost 30% more time and 30 more registers:
docs/benchmarks.md, 2026-11-30 sixth session.)

The K loop both GEMMs share, and the column order that hands each lane its words, live in `moe_register_k_loop`.

One program computes one M tile of `block_m` assignment rows (one expert's; 8, 16, 32 or 64) and one gate/up group
of 64 activation columns: its 64 gate rows and 64 up rows as one [128, 64] A operand a step (rows 0-63 gate, 64-127
up; wgmma's accumulator holds a row and the row 64 further in the same thread, so the SwiGLU epilogue needs no
exchange). A tile of 16 rows or more whose valid rows fit half of it runs the same loop on half the rows (wgmma's N
side is the rows, at least 8). Each tile decodes its expert's weights once, so the decode, which bounds these
kernels, scales with the tiles: 8- and 16-row tiles, which split an expert's rows into more tiles, lost to 32-row
ones even at ~8 assignments an expert (docs/benchmarks.md, 2026-11-30 seventh session). GEMM 2
(`moe_gemm2_register`) runs the same K loop over w2 [E, H, I/2]: 128 output columns a program (the last of H =
2,880 half masked), the intermediate's rows gathered and permuted the same way (one per assignment), the bias and
the routing weight in the epilogue. Where both GEMMs run here (`register_pair`; `fused_moe`), GEMM 1's epilogue
stores that gathered, permuted operand itself (`gathered_out`) and GEMM 2 takes it (`gathered`): no gather kernel
between them (bench moe on the H200: -1 to -5% at T = 64-1,024, 2026-11-30 twelfth session). This module holds
the launchers, their checks and the torch versions (`moe_gemm1_swiglu_register_ref`, `moe_gemm2_register_ref`); the
Gluon kernels live in `moe_register_kernels`. Gluon has no CPU interpreter: the tests compare the two on the GPU.
"""

from __future__ import annotations

import functools

import torch

from quickmoe.errors import ConfigError
from quickmoe.kernels.moe_align import MoEAlignment
from quickmoe.kernels.moe_configs import REGISTER_OPERAND_ROWS, REGISTER_STEPS_PER_STAGE, MoEKernelConfig
from quickmoe.kernels.moe_gather_permuted import STEP, gather_permuted_rows, padded_width

try:  # CPU installs without triton keep the torch references
    import triton
except ImportError:  # pragma: no cover
    triton = None

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from quickmoe.kernels.moe_register_k_loop import packed_bytes_layout
    from quickmoe.kernels.moe_register_kernels import _gemm1_register_kernel, _gemm2_register_kernel
except ImportError:  # pragma: no cover - a triton without Gluon
    gluon = None

__all__ = ["moe_gemm1_swiglu_register", "moe_gemm1_swiglu_register_ref", "moe_gemm2_register", "moe_gemm2_register_ref",
           "register_operand_problem", "register_pair"]

@functools.lru_cache(maxsize=16)
def _hopper(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] == 9


def register_operand_problem(acts: torch.Tensor, w: torch.Tensor, w_scales: torch.Tensor | None,
                             act_scales: torch.Tensor | None, block_m: int, split_k: int, *, group: int | None = None,
                             activation: str | None = None) -> str:
    """What the register-operand GEMMs need that these operands lack ('' when they can run): contiguous MXFP4
    weights w [E, N, K/2] (K a multiple of 32, one MX block: so a row's bytes are whole 16-byte units for TMA; a
    ragged last K step of 32 columns is fine), bf16 activations, a CUDA device of compute capability 9.x, tiles of
    8, 16, 32 or 64 rows (`REGISTER_OPERAND_ROWS`), one part of K; GEMM 1 (`group` given) also gate/up groups of 64
    (the last may be ragged, as a rank's at tensor parallel 2 of gpt-oss: I = 1,440) and gpt-oss's SwiGLU."""
    if not _hopper(acts.device):
        return "a Hopper GPU (wgmma)"
    if gluon is None:
        return "a triton with Gluon (triton.experimental.gluon)"
    if w_scales is None or w.dtype != torch.uint8 or w_scales.dtype != torch.uint8 or not w.is_contiguous():
        return "contiguous MXFP4 weights"
    if acts.dtype != torch.bfloat16 or act_scales is not None:
        return "bf16 activations"
    if (2 * w.shape[2]) % 32:
        return "K a multiple of 32"
    if block_m not in REGISTER_OPERAND_ROWS or split_k != 1:
        *most, last = REGISTER_OPERAND_ROWS
        return f"tiles of {', '.join(map(str, most))} or {last} rows and one part of K"
    if group is not None and (group != STEP or w.shape[1] % 2 or activation != "swiglu_gpt_oss"):
        return f"gate/up groups of {STEP} and gpt-oss's SwiGLU"
    return ""


def register_pair(acts: torch.Tensor, align: MoEAlignment, w1: torch.Tensor, w1_scales: torch.Tensor | None,
                  w2: torch.Tensor, w2_scales: torch.Tensor | None, config1: MoEKernelConfig,
                  config2: MoEKernelConfig, group: int, activation: str) -> bool:
    """Whether both GEMMs of an MoE layer run on these kernels (both configs ask for them, `register_operand`, and
    neither finds a problem with these bf16 activations): then GEMM 1 stores GEMM 2's gathered operand itself
    (`gathered_out`) and no gather runs between them."""
    return bool(config1.register_operand and config2.register_operand
                and not register_operand_problem(acts, w1, w1_scales, None, align.block_m, config1.split_k,
                                                 group=group, activation=activation)
                and not register_operand_problem(acts, w2, w2_scales, None, align.block_m, config2.split_k))


def _row_descriptors(x: torch.Tensor, block_m: int) -> tuple:
    """TMA descriptors of [block_m, 64] and [block_m / 2, 64] boxes of the gathered activations x [capacity, K]
    (a tile whose valid rows fit half of it copies and multiplies half; tiles of 8 rows have no half: wgmma's N
    side, the rows, is at least 8)."""
    def box(rows: int):
        layout = gl.NVMMASharedLayout.get_default_for([rows, STEP], gl.bfloat16)
        return TensorDescriptor.from_tensor(x, [rows, STEP], layout)

    full = box(block_m)
    return full, (box(_half(block_m)) if _half(block_m) < block_m else full)


def _weight_descriptor(packed: torch.Tensor, rows: int, block_m: int, steps_per_stage: int):
    """The TMA descriptor of the packed weights [E * N, K/2]: boxes [rows, 32 bytes x the K steps a box holds], which
    the kernels read from the descriptor. Tiles of 64 rows take a stage of two steps as one box of 64 bytes a row;
    smaller tiles a box a step (on the H200 one box a stage gained 4-5% on gpt-oss-20b's layer at T = 256-512, 64-row
    tiles, and lost 1-3% at 32-row tiles: docs/benchmarks.md, 2026-11-30 thirteenth session)."""
    steps = steps_per_stage if block_m == 64 else 1
    return TensorDescriptor.from_tensor(packed, [rows, steps * STEP // 2], packed_bytes_layout(steps))


# GEMM 2's registers a thread at most at tiles of 64 rows: four programs of 4 warps an SM (ptxas gave it 139 with a
# stage's weights in one box of 64 bytes a row, three programs an SM; 128 with the cap, no spill). Not at fewer rows:
# there the cap let ptxas take 105 instead of 96 (four programs an SM instead of five; the 120b's 32-row GEMM 1 3%
# slower on the H200, 2026-11-30 thirteenth session)
_GEMM2_MAXNREG_AT_64_ROWS = 128


def _half(block_m: int) -> int:
    """The rows a tile runs on when its valid rows fit them: half the tile, but at least 8 (wgmma's N side; a
    tile of 8 rows always runs whole)."""
    return max(block_m // 2, 8)


def moe_gemm1_swiglu_register_ref(acts: torch.Tensor, align: MoEAlignment, top_k: int, w1: torch.Tensor,
                                  w1_bias: torch.Tensor | None, w1_scales: torch.Tensor, group: int, limit: float,
                                  alpha: float, stages: int = 3, steps_per_stage: int = 1,
                                  maxnreg: int | None = None) -> torch.Tensor:
    """The torch version of `moe_gemm1_swiglu_register` (same arguments; the last three shape only the kernel's
    launch): inter [A, I], row a = gpt-oss's SwiGLU of token a // k through expert topk_ids[a], in
    float32 arithmetic on the dequantized weights, in acts' dtype."""
    from quickmoe.kernels.fused_moe import swiglu_gpt_oss
    from quickmoe.layouts.mxfp4_moe import dequantize_expert

    inter = torch.empty(align.num_assignments, w1.shape[1] // 2, dtype=acts.dtype, device=acts.device)
    ids = align.sorted_ids[:int(align.num_padded.item())].long()
    for tile, expert in enumerate(align.block_expert[:ids.numel() // align.block_m].tolist()):
        assign = ids[tile * align.block_m:(tile + 1) * align.block_m]
        assign = assign[assign < align.num_assignments]
        if assign.numel():
            h = acts[assign // top_k].float() @ dequantize_expert(w1[expert], w1_scales[expert], torch.float32).T
            if w1_bias is not None:
                h = h + w1_bias[expert].float()
            inter[assign] = swiglu_gpt_oss(h, limit, alpha, group).to(acts.dtype)
    return inter


def moe_gemm1_swiglu_register(acts: torch.Tensor, align: MoEAlignment, top_k: int, w1: torch.Tensor,
                              w1_bias: torch.Tensor | None, w1_scales: torch.Tensor, group: int, limit: float,
                              alpha: float, stages: int = 3, steps_per_stage: int = 1,
                              maxnreg: int | None = None, gathered_out: bool = False) -> torch.Tensor:
    """acts [T, H] bf16, MXFP4 w1 [E, 2I, H/2] (gate/up groups of 64) with scales [E, H/32, 2I] -> inter [A, I]
    (as `moe_gemm.moe_gemm1_swiglu` with gpt-oss's SwiGLU), the weights decoded into wgmma's register operand, in
    `stages` pipeline stages of `steps_per_stage` K steps of 64 (`REGISTER_STEPS_PER_STAGE`), at most `maxnreg`
    registers a thread (ptxas' choice where None; a config's `maxnreg`). `gathered_out`: the
    output is GEMM 2's operand as `gather_permuted_rows(inter, align, 1)` would make it from inter, [capacity,
    padded_width(I)] (each tile's row r holds assignment sorted_ids[r]'s row, a step's columns in the logical order,
    zeros past I; rows of sentinels unwritten), stored there by the epilogue so GEMM 2 needs no gather
    (`moe_gemm2_register(..., gathered=True)`). Raises ConfigError where `register_operand_problem` finds one."""
    _check_steps_per_stage(steps_per_stage)
    problem = register_operand_problem(acts, w1, w1_scales, None, align.block_m, 1, group=group,
                                       activation="swiglu_gpt_oss")
    if problem:
        raise ConfigError(f"GEMM 1 with the weights as wgmma's register operand (MoE config register_operand) "
                          f"needs {problem}; got {acts.dtype} activations on {acts.device}, w1 {w1.dtype} "
                          f"{tuple(w1.shape)}, group {group}, block_m {align.block_m}")
    hidden, intermediate, block_m = acts.shape[1], w1.shape[1] // 2, align.block_m
    rows, width = ((align.sorted_ids.numel(), padded_width(intermediate)) if gathered_out
                   else (align.num_assignments, intermediate))
    inter = torch.empty(rows, width, dtype=acts.dtype, device=acts.device)
    if align.sorted_ids.numel() == 0:
        return inter
    x = gather_permuted_rows(acts, align, top_k)  # [capacity, H]
    num_m = align.block_expert.numel()
    packed = w1.view(w1.shape[0] * w1.shape[1], w1.shape[2])  # [E * 2I, H/2] bytes
    w_desc = _weight_descriptor(packed, 2 * STEP, block_m, steps_per_stage)
    ragged = intermediate % STEP != 0  # the last gate/up group's up rows start fewer than 64 rows after its gate rows
    w_rows_desc = _weight_descriptor(packed, STEP, block_m, steps_per_stage) if ragged else w_desc
    x_desc, x_half_desc = _row_descriptors(x, block_m)
    _gemm1_register_kernel[(num_m * triton.cdiv(intermediate, STEP),)](
        x_desc, x_half_desc, w_desc, w_rows_desc, w1_scales, w1_bias if w1_bias is not None else w1, inter,
        align.sorted_ids, align.block_expert, align.num_padded, align.num_assignments, num_m, float(limit),
        float(alpha), H=hidden, I=intermediate, BM=block_m, HALF=_half(block_m), STAGES=stages,
        HAS_BIAS=w1_bias is not None, RAGGED=ragged, SUB=steps_per_stage, GATHERED=gathered_out, num_warps=4,
        maxnreg=maxnreg)
    return inter


def _check_steps_per_stage(steps_per_stage: int) -> None:
    if steps_per_stage not in REGISTER_STEPS_PER_STAGE:
        raise ConfigError(f"register-operand GEMM steps_per_stage = {steps_per_stage!r}: expected one of "
                          f"{list(REGISTER_STEPS_PER_STAGE)}")


def moe_gemm2_register_ref(acts: torch.Tensor, align: MoEAlignment, topk_weights: torch.Tensor, w2: torch.Tensor,
                           w2_bias: torch.Tensor | None, w2_scales: torch.Tensor, stages: int = 3,
                           maxnreg: int | None = None, steps_per_stage: int = 1) -> torch.Tensor:
    """The torch version of `moe_gemm2_register` (same arguments; the last three shape only the kernel's launch):
    [A, H], row a = (inter[a] @ W2[e]^T + b2[e]) x its routing weight, in float32 arithmetic on the dequantized
    weights, in acts' dtype."""
    from quickmoe.layouts.mxfp4_moe import dequantize_expert

    out = torch.empty(align.num_assignments, w2.shape[1], dtype=acts.dtype, device=acts.device)
    ids = align.sorted_ids[:int(align.num_padded.item())].long()
    route = topk_weights.reshape(-1)
    for tile, expert in enumerate(align.block_expert[:ids.numel() // align.block_m].tolist()):
        assign = ids[tile * align.block_m:(tile + 1) * align.block_m]
        assign = assign[assign < align.num_assignments]
        if assign.numel():
            y = acts[assign].float() @ dequantize_expert(w2[expert], w2_scales[expert], torch.float32).T
            if w2_bias is not None:
                y = y + w2_bias[expert].float()
            out[assign] = (y * route[assign, None].float()).to(acts.dtype)
    return out


def moe_gemm2_register(acts: torch.Tensor, align: MoEAlignment, topk_weights: torch.Tensor, w2: torch.Tensor,
                       w2_bias: torch.Tensor | None, w2_scales: torch.Tensor, stages: int = 3,
                       maxnreg: int | None = None, steps_per_stage: int = 1, gathered: bool = False) -> torch.Tensor:
    """inter [A, I] bf16 (row a: assignment a), MXFP4 w2 [E, H, I/2] with scales [E, I/32, H] -> [A, H] (as
    `moe_gemm.moe_gemm2`): 128 output columns a program, the last ones of H masked; the pipeline and `maxnreg` as
    GEMM 1's, but at most 128 registers at 64-row tiles where maxnreg is None.
    `gathered`: acts is already the gathered operand [capacity, padded_width(I)] (GEMM 1's `gathered_out`)."""
    _check_steps_per_stage(steps_per_stage)
    problem = register_operand_problem(acts, w2, w2_scales, None, align.block_m, 1)
    if problem:
        raise ConfigError(f"GEMM 2 with the weights as wgmma's register operand needs {problem}; got {acts.dtype} "
                          f"activations on {acts.device}, w2 {w2.dtype} {tuple(w2.shape)}, block_m {align.block_m}")
    hidden, block_m = w2.shape[1], align.block_m
    out = torch.empty(align.num_assignments, hidden, dtype=acts.dtype, device=acts.device)
    if align.sorted_ids.numel() == 0:
        return out
    intermediate = 2 * w2.shape[2]
    if gathered and tuple(acts.shape) != (align.sorted_ids.numel(), padded_width(intermediate)):
        raise ConfigError(f"GEMM 2's gathered operand: expected [{align.sorted_ids.numel()}, "
                          f"{padded_width(intermediate)}] (the alignment's capacity, I = {intermediate} in whole "
                          f"steps of {STEP}); got {tuple(acts.shape)}")
    x = acts if gathered else gather_permuted_rows(acts, align, 1)  # [capacity, I']: row r = inter[sorted_ids[r]]
    x_desc, x_half_desc = _row_descriptors(x, block_m)
    w_desc = _weight_descriptor(w2.view(w2.shape[0] * hidden, w2.shape[2]), 2 * STEP, block_m, steps_per_stage)
    num_m = align.block_expert.numel()
    _gemm2_register_kernel[(num_m * triton.cdiv(hidden, 2 * STEP),)](
        x_desc, x_half_desc, w_desc, w2_scales, w2_bias if w2_bias is not None else w2, topk_weights.reshape(-1), out,
        align.sorted_ids, align.block_expert, align.num_padded, align.num_assignments, num_m, H=hidden,
        I=intermediate, BM=block_m, HALF=_half(block_m), STAGES=stages, HAS_BIAS=w2_bias is not None,
        SUB=steps_per_stage, num_warps=4,
        maxnreg=maxnreg or (_GEMM2_MAXNREG_AT_64_ROWS if block_m == 64 else None))
    return out
