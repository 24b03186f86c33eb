"""Triton grouped GEMMs of the MoE experts: dense, MXFP4 or NVFP4 (decoded inside the kernel) or FP8 block-scaled
weights (FP8 x FP8 dots with per-token-group activation scales).

Tiles follow `moe_align`: the program of tile (m, n) (`moe_program_tile.tile_of` maps the 1-D grid) takes rows
[m*BLOCK_M, (m+1)*BLOCK_M) of `sorted_ids`, one expert's assignments (sentinels masked), and gathers their activation
rows through the index; nothing is padded or copied. Weights are in the kernel layouts of
`quickmoe.layouts.mxfp4_moe` / `quantized_moe`: out x in, MXFP4 blocks [E, N, K/2] (K-contiguous packed codes, each
4-byte word in the mma-pair order of `formats.mxfp4_mma_pairs`) with transposed E8M0 scales [E, K/32, N]; NVFP4
packed the same way (codes in mma-pair order) with E4M3 scales [E, K/16, N] and a per-row global scale [E, N] applied
after the K loop (weight-only: the activations stay in their dtype); FP8 e4m3 [E, N, K] with scales [E, K/128, N /
rows] (one per `rows` kernel rows: a block-scaled checkpoint's blocks), multiplied with FP8 activations quantized per
token and 128 columns (`kernels/fp8_quant.py`): each 128-column step's dot is scaled by (activation scale x weight
scale) and added in float32 (BLOCK_K = 128), one weight scale per tile when its rows share one; or dense [E, N, K].

- `moe_gemm1_swiglu`: gate_up (+ bias, optional) with gpt-oss's clamped SwiGLU in the epilogue, or plain
  SiLU(gate) * up (Mixtral, Qwen-MoE). With the layout's gate/up groups of GROUP columns, group g's slab is
  s_g gate rows then s_g up rows (s_g < GROUP only for a ragged last group, masked); a program computes
  BLOCK_N (a divisor of GROUP: decode-sized batches want more, smaller programs) of the group's activation
  columns from the matching gate and up rows: two dots of the same activation tile, no shuffles, or (config
  `gate_up_one_dot`) one dot of the 2 x BLOCK_N rows whose accumulator the epilogue splits: wider tensor-core
  tiles, which prefill-sized tiles want (docs/benchmarks.md, 2026-11-27 second session). Writes inter [A, I],
  row = assignment index.
- `moe_gemm2`: down (+ bias) times each assignment's routing weight, written to [A, H].
- `moe_combine`: out[t] = sum over the k assignments of token t (fixed order: deterministic).
With a config's `register_operand` (MXFP4 on Hopper, bf16 activations; GEMM 1: gpt-oss's SwiGLU) either GEMM hands
the work to `moe_gemm_register`'s Gluon kernels, the decoded weights as wgmma's register operand.
Block sizes, warps, stages, orientation, launch order, K in parts (`split_k`: several programs per output tile, the
last one by ticket adding their float32 parts in order, `_split_parts`) and how the weight tiles are loaded come from
`moe_configs` (tuned data files, else a fallback). Weight tiles may be loaded by TMA (`weight_tma`: a tensor
descriptor of the weights as [E * N, K], or K / 2 bytes for packed FP4, the tile copied into shared memory by the
tensor-memory accelerator instead of per-thread loads; on the H200 it made the FP8 GEMMs 6-26% faster at T =
2,048-8,192, docs/benchmarks.md, 2026-11-29 sixth session); the activations stay gathered row by row through
`sorted_ids`. The kernels are in `kernels/moe_gemm1_kernel.py` (GEMM 1) and `kernels/moe_gemm2_kernel.py` (GEMM 2,
the combine); their operand tiles (FP4 decoded by inline PTX on the GPU) come from `kernels/moe_tiles.py`. GEMM 1's
column tile is the layout's gate/up group, and both GEMMs share the alignment's BLOCK_M.
Accumulation is float32; outputs are in the activations' dtype. The model's sizes (H, I, k) are
compile-time constants: one compilation per model shape, K loops with constant bounds.
"""

from __future__ import annotations

import functools
import logging

import torch

from quickmoe.errors import ConfigError
from quickmoe.kernels.moe_align import MoEAlignment
from quickmoe.kernels.moe_configs import MoEKernelConfig
from quickmoe.kernels.moe_gemm_operands import fp8_config, launch_args, packed, scales_arg, weight_descriptor
from quickmoe.kernels.pdl import pdl_kwargs
from quickmoe.kernels.tickets import MAX_TICKETS, ticket_counters

try:  # CPU installs without triton keep the torch references
    import triton

    from quickmoe.kernels.moe_gemm1_kernel import _gemm1_swiglu_kernel
    from quickmoe.kernels.moe_gemm2_kernel import _gemm2_kernel, _moe_combine_kernel
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["moe_combine", "moe_gemm1_swiglu", "moe_gemm2"]

logger = logging.getLogger(__name__)


def _require_triton() -> None:
    if triton is None:
        raise RuntimeError("the MoE kernels need triton (pip install triton); fused_moe_ref is the torch version")


SUB_TILE_MIN_BLOCK_M = 64
SUB_TILE_MIN_ASSIGNMENTS = 4097  # prefill-sized launches: decode batches of up to 512 at top-8 stay below


def _sub_tiles(align: MoEAlignment) -> bool:
    """Whether the GEMMs run an expert's nearly empty last tile on a quarter of its rows: prefill-sized launches
    (A >= SUB_TILE_MIN_ASSIGNMENTS) with tiles of >= SUB_TILE_MIN_BLOCK_M rows. Each expert's last M tile is partly
    sentinels, and a tile's dots cost its BLOCK_M rows whatever they hold: at gpt-oss-120b's T = 8,192 (128
    experts, ~256 assignments each, BLOCK_M 128) half the experts have a third tile of a few rows, 20% of the
    tiles and 17% of each GEMM's time (the same GEMMs with every expert at exactly 256 rows). A tile whose valid
    rows (its first ones) fit BLOCK_M / 4 runs the same code on those: the same weights decoded, a quarter of the
    dots; a row's products are the same in the same K order (float32: identical bits). On the H100 it gained 2-13%
    of the MoE layer at T = 1,024-8,192; a half-size path as well lost up to 9% (20b T = 256, 120b T = 1,024), and
    at decode sizes (20b batch 256 takes BLOCK_M 64) the decode step grew 2% in a whole-model run, so decode
    launches compile without the branch (docs/benchmarks.md, twelfth session)."""
    return align.num_assignments >= SUB_TILE_MIN_ASSIGNMENTS and align.block_m >= SUB_TILE_MIN_BLOCK_M


def _split_parts(config: MoEKernelConfig, k: int, num_tiles: int, align: MoEAlignment) -> tuple[int, int]:
    """K in parts (`config.split_k`): (parts, columns per part). At decode sizes a GEMM is a stream of the
    experts' weights whose programs each walk all of K (gpt-oss-20b's GEMM 1 at T = 1: 360 programs of 11 K steps,
    1.4 warps a scheduler, waiting on the decode's latencies, docs/benchmarks.md, 2026-11-29 third session); with
    parts, each output tile's programs take an equal run of the K steps and store float32 partial sums, and the
    program that draws the tile's last ticket (`kernels/tickets.py`) adds them in order (the same bits whichever
    program finishes last) and runs the epilogue. The count is the largest up to split_k that divides the K steps
    (no part starts past K; the last step may be ragged, masked as without parts). Prefill-sized launches with
    sub-tiles, and launches of more tiles than there are counters, run in one part."""
    steps = triton.cdiv(k, config.block_k)
    parts = max(d for d in range(1, min(config.split_k, steps) + 1) if steps % d == 0)
    if parts > 1 and (_sub_tiles(align) or num_tiles > MAX_TICKETS):
        parts = 1
    return parts, steps // parts * config.block_k


def _split_workspace(parts: int, num_tiles: int, tile_elements: int, device: torch.device,
                     name: str) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(float32 partial sums [tiles x parts x tile_elements], the kernel's ticket counters), or (None, None)
    in one part."""
    if parts == 1:
        return None, None
    partials = torch.empty(num_tiles * parts * tile_elements, dtype=torch.float32, device=device)
    return partials, ticket_counters(device, name)


def moe_gemm1_swiglu(acts: torch.Tensor, align: MoEAlignment, top_k: int, w1: torch.Tensor,
                     w1_bias: torch.Tensor | None, w1_scales: torch.Tensor | None, group: int, limit: float,
                     alpha: float, *, act_scales: torch.Tensor | None = None, out_dtype: torch.dtype | None = None,
                     config: MoEKernelConfig | None = None, activation: str = "swiglu_gpt_oss",
                     w1_row_scale: torch.Tensor | None = None) -> torch.Tensor:
    """acts [T, H] (or MXFP8 [T, Hp] e4m3 with act_scales [T, Hp/32] uint8, or FP8 [T, H] with act_scales
    [T, H/128] float32 for FP8 weights) -> inter [A, I] in out_dtype (default: the activations' dtype); row a =
    SwiGLU of token a // k through expert topk_ids[a]. w1_row_scale [E, 2I]: NVFP4's per-row global scale."""
    _require_triton()
    config = fp8_config(w1, config if config is not None else MoEKernelConfig())
    out_dtype = out_dtype if out_dtype is not None else acts.dtype
    if config.register_operand:
        from quickmoe.kernels.moe_gemm_register import moe_gemm1_swiglu_register, register_operand_problem

        problem = register_operand_problem(acts, w1, w1_scales, act_scales, align.block_m, config.split_k,
                                           group=group, activation=activation)
        if not problem and w1_row_scale is None and out_dtype == acts.dtype:
            return moe_gemm1_swiglu_register(acts, align, top_k, w1, w1_bias, w1_scales, group, limit, alpha,
                                             stages=config.num_stages, steps_per_stage=config.steps_per_stage,
                                             maxnreg=config.maxnreg or None)
        _register_operand_declined(problem or "the activations' dtype as the output's and no row scale")
    intermediate = w1.shape[1] // 2
    hidden_size = w1.shape[2] * (2 if packed(w1_scales, w1) else 1)  # K of the weights (packed nibbles: x2)
    inter = torch.empty(align.num_assignments, intermediate, dtype=out_dtype, device=acts.device)
    block_n = min(config.block_n, group)  # columns per program: the group, or a part of it (more programs)
    num_m, num_n = align.block_expert.numel(), triton.cdiv(intermediate, group) * (group // block_n)
    tile_rows = block_n
    if config.weight_tma and config.gate_up_one_dot:  # one block of a group's gate rows then its up rows
        if block_n != group or intermediate % group:
            raise ConfigError(f"GEMM 1: {config} loads a program's gate and up rows as one TMA block, which needs "
                             f"whole gate/up groups: block_n {config.block_n} >= the group's {group} columns and "
                             f"the intermediate size {intermediate} a multiple of {group}; use two dots "
                             "(gate_up_one_dot false) here")
        tile_rows = 2 * block_n
    parts, k_part = _split_parts(config, hidden_size, num_m * num_n, align)
    partials, counters = _split_workspace(parts, num_m * num_n, 2 * align.block_m * block_n, acts.device,
                                          "moe_gemm1")
    _gemm1_swiglu_kernel[(num_m * num_n, parts)](
        acts, act_scales if act_scales is not None else acts,
        weight_descriptor(w1, w1_scales, tile_rows, config, "GEMM 1"), scales_arg(w1_scales, w1),
        w1_bias if w1_bias is not None else w1, w1_row_scale if w1_row_scale is not None else w1, inter,
        partials if partials is not None else inter, counters if counters is not None else align.num_padded,
        align.sorted_ids, align.block_expert, align.num_padded,
        top_k, align.num_assignments, num_m, num_n, config.group_m, acts.stride(0), act_scales.stride(0) if act_scales is not None else 0,
        float(limit), float(alpha), H=hidden_size, I=intermediate, GROUP=group,
        BLOCK_M=align.block_m, BLOCK_N=block_n, BLOCK_K=config.block_k, HAS_BIAS=w1_bias is not None, SILU=activation == "silu",
        ROW_SCALE=w1_row_scale is not None, SUB_TILES=_sub_tiles(align), ONE_DOT=config.gate_up_one_dot,
        SPLIT_K=parts, K_PART=k_part, **launch_args(acts, act_scales, w1, w1_scales, out_dtype, config),
        **pdl_kwargs(acts.device))
    return inter


@functools.lru_cache(maxsize=16)
def _register_operand_declined(needs: str) -> None:
    """Said once per reason: a config asked for a register-operand GEMM (`moe_gemm_register`) where its operands do
    not allow it, so the GEMM runs the Triton tile the config also describes (same results within rounding; a
    float32 model on a Hopper GPU, for one)."""
    logger.info("MoE GEMM: the tuned config's register-operand kernel needs %s; running the Triton tile", needs)


def moe_gemm2(acts: torch.Tensor, align: MoEAlignment, topk_weights: torch.Tensor, w2: torch.Tensor,
              w2_bias: torch.Tensor | None, w2_scales: torch.Tensor | None, *, act_scales: torch.Tensor | None = None,
              out_dtype: torch.dtype | None = None, config: MoEKernelConfig | None = None,
              w2_row_scale: torch.Tensor | None = None) -> torch.Tensor:
    """inter [A, I] (or MXFP8 / FP8 with act_scales) -> [A, H]: (inter[a] @ W2[e].T + b2[e]) * topk_weights[a]."""
    _require_triton()
    config = fp8_config(w2, config if config is not None else MoEKernelConfig())
    out_dtype = out_dtype if out_dtype is not None else acts.dtype
    if config.register_operand:
        from quickmoe.kernels.moe_gemm_register import moe_gemm2_register, register_operand_problem

        problem = register_operand_problem(acts, w2, w2_scales, act_scales, align.block_m, config.split_k)
        if not problem and w2_row_scale is None and out_dtype == acts.dtype:
            return moe_gemm2_register(acts, align, topk_weights, w2, w2_bias, w2_scales, stages=config.num_stages,
                                      steps_per_stage=config.steps_per_stage, maxnreg=config.maxnreg or None)
        _register_operand_declined(problem or "the activations' dtype as the output's and no row scale")
    hidden_size = w2.shape[1]
    intermediate = w2.shape[2] * (2 if packed(w2_scales, w2) else 1)
    out = torch.empty(align.num_assignments, hidden_size, dtype=out_dtype, device=acts.device)
    num_m, num_n = align.block_expert.numel(), triton.cdiv(hidden_size, config.block_n)
    parts, k_part = _split_parts(config, intermediate, num_m * num_n, align)
    partials, counters = _split_workspace(parts, num_m * num_n, align.block_m * config.block_n, acts.device,
                                          "moe_gemm2")
    _gemm2_kernel[(num_m * num_n, parts)](
        acts, act_scales if act_scales is not None else acts,
        weight_descriptor(w2, w2_scales, config.block_n, config, "GEMM 2"), scales_arg(w2_scales, w2),
        w2_bias if w2_bias is not None else w2, w2_row_scale if w2_row_scale is not None else w2,
        topk_weights.reshape(-1), out, partials if partials is not None else out,
        counters if counters is not None else align.num_padded, align.sorted_ids, align.block_expert,
        align.num_padded,
        align.num_assignments, num_m, num_n, config.group_m, acts.stride(0), act_scales.stride(0) if act_scales is not None else 0,
        H=hidden_size, I=intermediate, BLOCK_M=align.block_m, BLOCK_N=config.block_n,
        BLOCK_K=config.block_k, HAS_BIAS=w2_bias is not None, ROW_SCALE=w2_row_scale is not None,
        SUB_TILES=_sub_tiles(align), SPLIT_K=parts, K_PART=k_part,
        **launch_args(acts, act_scales, w2, w2_scales, out_dtype, config),
        **pdl_kwargs(acts.device))
    return out


def moe_combine(per_assignment: torch.Tensor, top_k: int, block_h: int = 256, *,
                absent_ids: torch.Tensor | None = None, num_experts: int = 0) -> torch.Tensor:
    """[T*k, H] -> [T, H]: the sum of each token's k rows, in float32, in the rows' dtype. `absent_ids` ([T, k]
    int32, with `num_experts`): rows whose id is num_experts (another rank's assignment, which no GEMM tile
    wrote) are left out."""
    _require_triton()
    num_assignments, hidden_size = per_assignment.shape
    out = torch.empty(num_assignments // top_k, hidden_size, dtype=per_assignment.dtype,
                      device=per_assignment.device)
    if out.shape[0]:
        _moe_combine_kernel[(out.shape[0], triton.cdiv(hidden_size, block_h))](
            per_assignment, out, absent_ids if absent_ids is not None else per_assignment, num_experts,
            hidden_size, TOP_K=top_k, BLOCK_H=block_h, ABSENT=absent_ids is not None,
            **pdl_kwargs(per_assignment.device))
    return out
