"""Tune the MoE GEMMs' launch configs on this GPU and write them as data files into kernels/configs/.

PYTHONPATH=src python3 scripts/tune_moe.py [--shapes gpt-oss-20b,gpt-oss-120b] [--format FMT] [--tokens 1,4,...]
                                           [--out DIR] [--grid small|full] [--block-m 16,64] [--quick]
                                           [--min-gain 0.02] [--no-span]

For each shape and token count T, each candidate BLOCK_M (the alignment's tile, shared by both GEMMs) gets
its own alignment; then every candidate of GEMM 1 (gate_up + SwiGLU) and of GEMM 2 (down) is timed alone,
replayed in a CUDA graph that holds several calls over rotating random inputs (more weight bytes than the
L2 cache holds, never zeros), median of several replays. The BLOCK_M with the smallest GEMM 1 + GEMM 2 time
wins, with each GEMM's best config for it (MXFP4 tiles of 8-64 rows on Hopper: or that config's
`register_operand` twin where it is faster, `register_twin`; where those kernels can run a 32-row tile is among the
candidates from 4 assignments an expert on, `block_m_candidates`; a tile none of whose candidates ran is left out),
or the fallback configs (`moe_configs._fallback`, timed too) where they beat every candidate, unless the pair the
engine reads at T now
(`in_use_pair`: the nearest entries of the files in kernels/configs/ as the run starts, timed the same way) was within
`--min-gain` (default 2%) of its time, which is then written instead (`pick`). One file per GEMM shape is written
(named by `moe_configs.config_file_name`: shape, format ("dense" for bf16 experts), projection, device), mapping T to
the config; token counts already in an existing file and not tuned now are kept, and the file is written after
every T (a call cut short keeps what it measured). Start-up never tunes: it reads these files.
`--format`: the experts' weight format, one of the shape's (`bench.moe_experts`: mxfp4 for gpt-oss; bf16, fp8,
nvfp4 for the SiLU shapes; default the shape's first). FP8 experts take FP8 activations quantized per token and
128 columns before the graph (the GEMM alone is timed, as serving quantizes them before it), NVFP4 experts their
per-row global scales; every format writes bf16.
`--grid small` (default): a few candidates per GEMM and tile (4 to 12; at T <= 2 each also with K in 2 and 4 parts,
`SPLIT_MAX_TOKENS`), so that several token counts fit in one
10-minute device call (every candidate compiles a Triton kernel, 2-3 s); its axes keep the values that won most
in the committed files. `--grid full`: the grid the gpt-oss MXFP4 files were tuned with (48 and 64 candidates for
GEMM 1 and GEMM 2 per decode-sized tile, 16 each per prefill tile). `--quick` (either grid): the column tile only,
at the decode settings.
`--block-m`: these tiles instead of the ones chosen from T.
`--span` (default; `--no-span`: at T alone): every time is the mean of a call at T and one at the last T that will
read T's key (`span_end`; the file's keys and the tuned ones), where that is above T, because a winner at T alone can
lose over the key's range (Mixtral-8x7B NVFP4's key 65 on the H200, 2026-12-04 fourth session: the winner at T = 65
alone made the 72-sequence decode step 0.5% slower, the winner over T = 65 and 72 made it 8.8% faster). The finalists
(the winner, the fallback, the pair in use) are then timed at each end apart, and a winner more than 1% slower than
the pair in use at T itself is not written (`guard_key`: the mean hid such a loss at Qwen3 NVFP4's key 256 on the
H200, 2026-12-04 fifth session); the line names both ends' times.
Prints one line per (shape, format, T): the winning configs and their times, and the measured times of the pair in
use and of the fallback configs for comparison.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
from pathlib import Path

import torch
import triton

from quickmoe.bench.moe_experts import GROUP, SHAPES, ExpertSet, make_experts
from quickmoe.errors import ConfigError
from quickmoe.kernels import moe_configs
from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group
from quickmoe.kernels.fused_moe import device_arch
from quickmoe.kernels.moe_align import moe_align
from quickmoe.kernels.moe_configs import MoEKernelConfig, config_file_name
from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu, moe_gemm2
from quickmoe.kernels.moe_gemm_operands import FP8_GROUP
from quickmoe.kernels.routing import route_ref

SETS = 8  # input sets per graph: their experts' bytes outgrow the L2 cache
CALLS = 16  # calls per graph replay
GRIDS = ("small", "full")
FOUR_BIT = ("mxfp4", "nvfp4")  # two weights per byte: K steps of 64 won at prefill tiles
MIN_GAIN = 0.02  # `pick`: a winner must beat the pair in use by more than this fraction of its time
KEY_TOLERANCE = 0.01  # `--span`: a winner may be at most this fraction slower than the pair in use at T itself
DECODE_K = 256  # deep K steps for decode-sized tiles: 256 won in every committed file (FP8: see `_configs`)
# K in parts (`MoEKernelConfig.split_k`) is tried up to this token count, in these part counts: on the H200 2 parts
# won at T = 1 (gpt-oss's GEMMs 9-11%), 4 parts Mixtral's GEMM 2 (K = 14,336) at T = 1 and 2 (10-35%); from T = 2 on
# every other GEMM lost (docs/benchmarks.md, 2026-11-29 ninth session)
SPLIT_MAX_TOKENS = 2
SPLIT_CANDIDATES = (1, 2, 4)

# Axes of a grid, in the order (block_n, block_k, num_warps, num_stages, swap_ab, group_m, gate_up_one_dot).
# The full grid (gpt-oss MXFP4's tuning): GEMM 1, GEMM 2 at decode-sized and prefill tiles.
FULL_GEMM1 = (((16, 32, GROUP), (128, 256), (2, 4), (3, 4), (False, True), (1,), (False,)),
              ((GROUP,), (64, 128), (4, 8), (3,), (False,), (1, 8), (False, True)))
FULL_GEMM2 = (((16, 32, 64, 128), (128, 256), (2, 4), (3, 4), (False, True), (1,), (False,)),
              ((128, 256), (64, 128), (4, 8), (3,), (False,), (1, 8), (False,)))


# Where the register-operand kernels can run, tiles of REGISTER_TILE rows are tried too from this many assignments an
# expert on: those kernels decode an expert's weights once a tile (and run a tile on its half where the rows fit),
# so they pay with tiles larger than an expert's rows. Their 32-row pair won gpt-oss-120b's T = 256 on the H200 at
# ~8 rows an expert (at TP = 1 and 2), where the candidates stopped at 16; at ~4 (T = 128) the 8-row Triton pair won
# (docs/benchmarks.md, 2026-11-30 seventh and eighth sessions).
REGISTER_TILE = 32
REGISTER_TILE_MIN_ROWS = 4


def block_m_candidates(tokens: int, top_k: int, experts: int, register: bool = False) -> list[int]:
    """Tiles from about half to four times the mean rows per expert hit, at most 256; 8 and 16 always where they are
    among the last three (8 rows: the transposed orientation only, see `_configs`). `register`: the register-operand
    kernels can run these experts, and a tile of REGISTER_TILE rows joins from REGISTER_TILE_MIN_ROWS rows an expert."""
    mean_rows = tokens * top_k / min(experts, tokens * top_k)
    tiles = [m for m in (8, 16, 32, 64, 128, 256) if m <= 16 or mean_rows / 2 >= m / 4][-3:]
    if register and mean_rows >= REGISTER_TILE_MIN_ROWS and REGISTER_TILE not in tiles:
        tiles = sorted({*tiles, REGISTER_TILE})
    return tiles


def _prefill_k(fmt: str) -> int:
    """K step of prefill tiles: 64 for the 4-bit formats (their winners), else 128 (bf16: no file to go by yet;
    FP8: see `_configs`)."""
    return 64 if fmt in FOUR_BIT else 128


def _prefill_swap(fmt: str) -> tuple[bool, ...]:
    """In the committed files the transposed orientation won prefill tiles only with 4-bit weights."""
    return (False, True) if fmt in FOUR_BIT else (False,)


def _configs(block_m: int, fmt: str, axes) -> list[MoEKernelConfig]:
    """The grid's configs in order, each once: FP8's K step is its scale group (the kernel forces it), so a grid's
    other block_k values would time the same kernel again; tiles of 8 rows take the transposed orientation (the
    tokens are the mma's 8-wide side there), so their plain-orientation points become transposed ones. Prefill
    tiles of FP8 and bf16 weights come twice, the second time with their weight tiles by TMA (`weight_tma`): on the
    H200 it won every FP8 prefill point measured (docs/benchmarks.md, 2026-11-29 sixth session). Only two-dot GEMM 1
    tiles get a TMA twin, and 4-bit weights none: one-dot blocks and packed tiles by TMA gained nothing there
    (2026-11-29 seventh session; `moe_config_sweep.py --weight-tma 0,1` still tries them). NVFP4 leaves out the
    tiles `moe_configs.nvfp4_tile_unreliable` names."""
    configs = [MoEKernelConfig(block_m=block_m, block_n=n, block_k=FP8_GROUP if fmt == "fp8" else k, num_warps=w,
                               num_stages=s, swap_ab=swap or block_m < 16, group_m=group, gate_up_one_dot=one_dot)
               for n, k, w, s, swap, group, one_dot in itertools.product(*axes)]  # 8 rows: transposed only
    if fmt not in FOUR_BIT and block_m > 32:  # prefill tiles of FP8 / bf16 weights: also their weight tiles by TMA
        configs += [dataclasses.replace(c, weight_tma=True) for c in configs if not c.gate_up_one_dot]
    if fmt == "nvfp4":
        configs = [c for c in configs if not moe_configs.nvfp4_tile_unreliable(c)]
    return list(dict.fromkeys(configs))


def gemm1_candidates(block_m: int, fmt: str = "mxfp4", *, grid: str = "small",
                     quick: bool = False) -> list[MoEKernelConfig]:
    """GEMM 1's column tile is the layout's gate/up group or a part of it (more programs for decode-sized
    batches). Decode-sized tiles: deep K steps, 2 or 4 warps, both orientations, gate and up in two dots (one was
    slower there); prefill tiles: the whole group, 4 or 8 warps, launch order in groups of 8 M tiles, gate and up
    in two dots or one (`gate_up_one_dot`), the transposed orientation for 4-bit weights only. `grid` "full": also
    column tiles of 16, both K steps, 4 stages, groups of 1 (`FULL_GEMM1`). `quick`: the column tile only, at the
    decode settings that won before."""
    if quick:
        axes = ((16, 32, GROUP), (DECODE_K,), (4,), (3,), (False,), (1,), (False,))
    elif grid == "full":
        axes = FULL_GEMM1[block_m > 32]
    elif block_m <= 32:
        axes = ((32, GROUP), (DECODE_K,), (2, 4), (3,), (False, True), (1,), (False,))
    else:
        axes = ((GROUP,), (_prefill_k(fmt),), (4, 8), (3,), _prefill_swap(fmt), (8,), (False, True))
    return _configs(block_m, fmt, axes)


def gemm2_candidates(block_m: int, fmt: str = "mxfp4", *, grid: str = "small",
                     quick: bool = False) -> list[MoEKernelConfig]:
    """GEMM 2's column tile is free: 32 to 128 for decode-sized tiles, 64 to 256 for prefill ones (FP8 prefill won
    at 64); the other axes as GEMM 1's."""
    if quick:
        axes = ((16, 32, 64), (DECODE_K,), (4,), (3,), (False,), (1,), (False,))
    elif grid == "full":
        axes = FULL_GEMM2[block_m > 32]
    elif block_m <= 32:
        axes = ((32, 64, 128), (DECODE_K,), (2, 4), (3,), (False, True), (1,), (False,))
    else:
        axes = ((64, 128, 256), (_prefill_k(fmt),), (4, 8), (3,), _prefill_swap(fmt), (8,), (False,))
    return _configs(block_m, fmt, axes)


def graph_seconds(fn, sets: int) -> float:
    """Seconds per call of fn(i), i over the input sets, CALLS calls per CUDA graph replay, median of 5."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(sets):
            fn(i)  # compiles outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for c in range(CALLS):
                fn(c % sets)
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / CALLS)
    return statistics.median(times)


MAX_REL_ERR = 1e-2  # a candidate's output against the fallback config's, same inputs (the tiles change no sum's terms)


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-30)).item()


def best_of(candidates, run, reference: torch.Tensor | dict[int, torch.Tensor] | None = None
            ) -> tuple[float, MoEKernelConfig]:
    """The fastest candidate whose output on input set 0 matches `reference` (the fallback config's; a dict: on each
    input set it names, as `tune_tokens` checks both T of `--span`): a tile the compiler gets wrong is never written
    to a file (on the H200 two FP8 decode tiles gave relative errors of 3.6 at T = 16 while T = 1 passed,
    docs/benchmarks.md)."""
    checks = {} if reference is None else reference if isinstance(reference, dict) else {0: reference}
    timed = []
    for config in candidates:
        try:
            errs = [rel_err(run(i, config), want) for i, want in checks.items()]
            err = next((e for e in errs if not e < MAX_REL_ERR), max(errs, default=0.0))  # NaN or the largest
            if not err < MAX_REL_ERR:  # NaN included
                print(f"  {config}: skipped (wrong result: relative error {err:.3g} against the fallback config)")
                continue
            timed.append((graph_seconds(lambda i: run(i, config), SETS), config))
        except (RuntimeError, triton.runtime.errors.OutOfResources,
                triton.compiler.errors.CompilationError) as exc:  # a candidate too big for the chip
            print(f"  {config}: skipped ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})")
    if not timed:
        raise RuntimeError(f"no candidate of {len(candidates)} ran and matched the fallback config's output")
    return min(timed, key=lambda tc: tc[0])


def _activations(x: torch.Tensor, fmt: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(activations, their scales or None): FP8 experts multiply FP8 activations quantized per token and 128
    columns, done here, outside the timed graph (serving quantizes before the GEMM too); the others take bf16."""
    return quantize_fp8_per_token_group(x) if fmt == "fp8" else (x, None)


def make_inputs(ex: ExpertSet, top_k: int, tokens: int, g: torch.Generator, span_end: int | None = None):
    """SETS input sets: GEMM 1's activations [T, H], the routing (weights, ids) [T, k], GEMM 2's activations
    [T*k, I], each activation as (values, scales or None). Drawn in the order of before the formats, so a format
    tuned then gets the same inputs. `span_end`: the second half of the sets has that many tokens instead (`--span`),
    so that a graph replay's time is the mean of a call at T and one at span_end."""
    device, shape = ex.w1.device, ex.shape
    counts = [tokens] * SETS if span_end is None else [tokens] * (SETS // 2) + [span_end] * (SETS - SETS // 2)
    xs, routes = [], []
    for t in counts:
        xs.append(_activations(torch.randn(t, shape.hidden, generator=g).to(torch.bfloat16).to(device), ex.fmt))
        routes.append(route_ref(torch.randn(t, shape.experts, generator=g).to(device), top_k))
    inter = [_activations(torch.randn(t * top_k, shape.inter, generator=g).to(torch.bfloat16).to(device), ex.fmt)
             for t in counts]
    return xs, routes, inter


def span_end(tokens: int, keys) -> int | None:
    """The last token count that reads key `tokens` of a table with these keys (`tokens` among them) under
    `moe_kernel_config`'s nearest-key rule, where that is above `tokens`; None where the key serves no larger T or
    is the table's last (which serves every larger T). `--span` times each T's candidates there too: Mixtral-8x7B
    NVFP4's key 65 serves T = 65-72 on the H200, and its winner at T = 65 alone (16-row tiles, 13% faster than the
    pair in use) made the model's 72-sequence decode step 0.5% slower (2026-12-04 fourth session)."""
    keys = sorted(set(keys) | {tokens})
    starts = moe_configs.nearest_key_starts(keys)
    i = keys.index(tokens)
    if i + 1 == len(keys):
        return None
    end = starts[i + 1] - 1
    return end if end > tokens else None


def gemm_runs(ex: ExpertSet, top_k: int, inputs, aligns):
    """GEMM 1 and GEMM 2 as run(i, config) over input set i, with the format's arguments (weight scales, FP8
    activation scales, NVFP4 row scales; bf16 out), for the candidates and the fallback alike."""
    (xs, routes, inter), kw, activation = inputs, ex.kwargs, ex.shape.activation

    def gemm1(i, config):
        return moe_gemm1_swiglu(xs[i][0], aligns[i], top_k, ex.w1, ex.b1, kw.get("w1_scales"), GROUP, 7.0, 1.702,
                                act_scales=xs[i][1], out_dtype=torch.bfloat16, config=config, activation=activation,
                                w1_row_scale=kw.get("w1_row_scale"))

    def gemm2(i, config):
        return moe_gemm2(inter[i][0], aligns[i], routes[i][0], ex.w2, ex.b2, kw.get("w2_scales"),
                         act_scales=inter[i][1], out_dtype=torch.bfloat16, config=config,
                         w2_row_scale=kw.get("w2_row_scale"))

    return gemm1, gemm2


def with_parts(candidates: list[MoEKernelConfig], tokens: int) -> list[MoEKernelConfig]:
    """The candidates, and at T <= SPLIT_MAX_TOKENS each also with K in each of SPLIT_CANDIDATES parts."""
    if tokens > SPLIT_MAX_TOKENS:
        return candidates
    return list(dict.fromkeys(dataclasses.replace(c, split_k=p) for c in candidates for p in SPLIT_CANDIDATES))


def register_twin(best: tuple[float, MoEKernelConfig], run, reference: torch.Tensor | dict[int, torch.Tensor],
                  problem: str) -> tuple[float, MoEKernelConfig]:
    """The winner (seconds, config), or its twin with `register_operand` (the GEMM by `kernels/moe_gemm_register`'s
    Gluon kernels, the winner's Triton tile its fall-back) where the twin is faster. Tried only where the engine
    would run it: `problem` is `register_operand_problem`'s answer for these operands and tile rows ('' where the
    kernels can run: MXFP4 on Hopper, tiles of `REGISTER_OPERAND_ROWS` rows, gate/up groups of 64 (the last may be
    ragged) and K in blocks of 32, gpt-oss's SwiGLU), and the winner must take K in one part. Elsewhere the twin
    would decline and run the winner's tile: timing it could only pick a label by noise. On the H200 it won both
    gpt-oss-20b GEMMs at T = 128-512 by 19-27% and lost at T <= 32 and 2,048 (docs/benchmarks.md, 2026-11-30 sixth
    session). Only the winner's tile rows are tried: at gpt-oss-120b's TP = 2 key 256 the 32-row register pair beat
    the 16-row winner in the model (2026-11-30 eighth session), which the file took by hand. Each twin is tried with
    one K step a pipeline stage at the winner's stages and with two at 2 stages (2026-11-30 eleventh session: 4-10%
    faster at gpt-oss-20b's T = 64-256)."""
    seconds, config = best
    if problem or config.split_k != 1:
        return best
    try:
        twin = best_of([dataclasses.replace(config, register_operand=True),
                        dataclasses.replace(config, register_operand=True, steps_per_stage=2, num_stages=2)],
                       run, reference)
    except RuntimeError as exc:  # it did not run or did not match the fallback config's output
        print(f"  register-operand twin of {config}: skipped ({exc})")
        return best
    return twin if twin[0] < seconds else best


def register_problems(ex: ExpertSet, block_m: int) -> tuple[str, str]:
    """`register_operand_problem` of GEMM 1 and GEMM 2 of these experts at tiles of block_m rows (bf16
    activations, K in one part)."""
    from quickmoe.kernels.moe_gemm_register import register_operand_problem

    shape, scales = ex.shape, ex.kwargs
    acts1 = torch.empty(0, shape.hidden, dtype=torch.bfloat16, device=ex.w1.device)
    acts2 = torch.empty(0, shape.inter, dtype=torch.bfloat16, device=ex.w1.device)
    return (register_operand_problem(acts1, ex.w1, scales.get("w1_scales"), None, block_m, 1, group=GROUP,
                                     activation=shape.activation),
            register_operand_problem(acts2, ex.w2, scales.get("w2_scales"), None, block_m, 1))


def tune_tokens(ex: ExpertSet, top_k: int, tokens: int, g: torch.Generator, *, grid: str = "small",
                quick: bool = False, block_ms: list[int] | None = None,
                in_use: tuple[MoEKernelConfig, MoEKernelConfig] | None = None, span_end: int | None = None):
    """The best (GEMM 1 + GEMM 2 seconds, GEMM 1 s, GEMM 2 s, config 1, config 2) over the tiles `block_ms`
    (default: `block_m_candidates`), the fallback configs' (GEMM 1 s, GEMM 2 s), and the same tuple as the best's for
    `in_use` (the pair the engine reads at T now, `in_use_pair`; GEMM 2 on GEMM 1's alignment, as `fused_moe` runs
    them), or None where it was not given or did not run. `span_end`: every time is the mean of calls at T and at
    span_end tokens (`make_inputs`); the tiles tried are T's."""
    shape = ex.shape
    inputs = make_inputs(ex, top_k, tokens, g, span_end)
    ids_sets = [ids for _, ids in inputs[1]]
    fallback = moe_configs._fallback(tokens)
    fb1, fb2 = gemm_runs(ex, top_k, inputs, [moe_align(ids, shape.experts, fallback.block_m) for ids in ids_sets])
    # rows by assignment: any tile writes the same; with span_end, checked at both T (Triton specializes on sizes)
    checked = [0] if span_end is None else [0, SETS - 1]
    ref1 = {i: fb1(i, fallback).clone() for i in checked}
    ref2 = {i: fb2(i, fallback).clone() for i in checked}
    results = []
    register = register_problems(ex, REGISTER_TILE) == ("", "")
    tiles = block_ms or block_m_candidates(tokens, top_k, shape.experts, register)
    for block_m in tiles:
        gemm1, gemm2 = gemm_runs(ex, top_k, inputs, [moe_align(ids, shape.experts, block_m) for ids in ids_sets])
        try:
            t1, c1 = best_of(with_parts(gemm1_candidates(block_m, ex.fmt, grid=grid, quick=quick), tokens), gemm1,
                             ref1)
            t2, c2 = best_of(with_parts(gemm2_candidates(block_m, ex.fmt, grid=grid, quick=quick), tokens), gemm2,
                             ref2)
        except RuntimeError as exc:  # no candidate of this tile ran (Mixtral bf16 at T = 512 on the H200: 256 rows
            print(f"  block_m {block_m}: left out ({exc})")  # of 128-deep K steps need more shared memory)
            continue
        problem1, problem2 = register_problems(ex, block_m)
        t1, c1 = register_twin((t1, c1), gemm1, ref1, problem1)
        t2, c2 = register_twin((t2, c2), gemm2, ref2, problem2)
        results.append((t1 + t2, t1, t2, c1, c2))
    f1 = graph_seconds(lambda i: fb1(i, fallback), SETS)
    f2 = graph_seconds(lambda i: fb2(i, fallback), SETS)
    used = None
    if in_use is not None:
        u1, u2 = in_use
        gemm1, gemm2 = gemm_runs(ex, top_k, inputs, [moe_align(ids, shape.experts, u1.block_m) for ids in ids_sets])
        try:
            (t1, _), (t2, _) = best_of([u1], gemm1, ref1), best_of([u2], gemm2, ref2)
            used = (t1 + t2, t1, t2, u1, u2)
        except RuntimeError as exc:  # it did not run or did not match the fallback config's output
            print(f"  the entry in use ({u1}, {u2}): not timed ({exc})")
    if not results:
        raise RuntimeError(f"T={tokens}: no tile of {tiles} had a candidate that ran and matched the fallback config")
    best = min(results, key=lambda r: r[0])
    ends = None
    if span_end is not None:  # the finalists at each end apart (`guard_key`); all of them ran and matched above
        pairs = [best[3:], (fallback, fallback)] + ([used[3:]] if used is not None else [])
        ends = {pair: pair_seconds_at_ends(ex, top_k, inputs, ids_sets, *pair) for pair in dict.fromkeys(pairs)}
    return best, (f1, f2), used, ends


def pair_seconds_at_ends(ex: ExpertSet, top_k: int, inputs, ids_sets, c1: MoEKernelConfig, c2: MoEKernelConfig
                         ) -> tuple[float, float]:
    """GEMM 1 + GEMM 2 seconds of the pair (GEMM 2 on GEMM 1's alignment) over the input sets at T (the first half,
    `make_inputs`) and over those at span_end (the second half), each timed apart."""
    gemm1, gemm2 = gemm_runs(ex, top_k, inputs, [moe_align(ids, ex.shape.experts, c1.block_m) for ids in ids_sets])
    half = SETS // 2

    def seconds(first: int, count: int) -> float:
        return (graph_seconds(lambda i: gemm1(first + i, c1), count)
                + graph_seconds(lambda i: gemm2(first + i, c2), count))

    return seconds(0, half), seconds(half, SETS - half)


def in_use_pair(shape: str, fmt: str, device_name: str, arch: str | None, config_dir: Path,
                tokens: int) -> tuple[MoEKernelConfig, MoEKernelConfig]:
    """The configs of GEMM 1 and GEMM 2 that the engine reads at T from the files in config_dir
    (`moe_kernel_config`: each file's nearest token count, else the fallback)."""
    spec = SHAPES[shape]
    weights = {"bf16": "dense"}.get(fmt, fmt)
    return (moe_configs.moe_kernel_config(spec.experts, 2 * spec.inter, spec.hidden, weights, device_name, tokens,
                                          config_dir, arch, proj="gate_up"),
            moe_configs.moe_kernel_config(spec.experts, spec.hidden, spec.inter, weights, device_name, tokens,
                                          config_dir, arch, proj="down"))


def pick(tuned: tuple, used: tuple | None, min_gain: float = 0.0) -> tuple:
    """What to write at T: the tuned winner (`tune_shape` passes the fallback pair instead where it was faster than
    every candidate: Mixtral bf16's T = 128 on the H200, whose winner against key 64's tiles in use was 2% slower than
    the fallback), or the pair in use where the winner is not faster than it by more than `min_gain` (a fraction of
    the winner's time). A key whose T took the untuned fallback's middle config wins big when
    tuned (Qwen3-30B-A3B FP8 at T = 256: the model's batch-256 step -5.7%), but the small grid need not hold what is
    in use: Qwen3's bf16 experts at T = 256 had their winner 5% slower than it (docs/benchmarks.md, 2026-12-03 fourth
    session), and writing that would have slowed the model. Winners 0.4-1% faster alone (Mixtral FP8 at T = 32, Qwen3
    bf16 at 96 and 128; fifth session) ran level in the model: a gain that small is the timing's noise."""
    return used if used is not None and used[0] <= tuned[0] * (1.0 + min_gain) else tuned


def guard_key(chosen: tuple, used: tuple | None, ends: dict | None, tolerance: float = KEY_TOLERANCE
              ) -> tuple[tuple, str]:
    """(what to write, why it is the pair in use or ""): with `--span` (`ends`: each finalist pair's seconds at T and
    at span_end, `pair_seconds_at_ends`) a winner over the mean of both ends is written only where it is at most
    `tolerance` slower than the pair in use at T itself. A key's T is a size steps hit exactly (decode batches of
    powers of two and of the graph buckets), and the mean can hide a loss there: Qwen3-30B-A3B NVFP4's key 256 on
    the H200 took the fallback's 64-row tiles over T = 256 and 384 (7% faster on the mean than key 128's 16-row
    pair), and the 256-sequence decode step got 2.4-3.6% slower (2026-12-04 fifth session). Such a key wants two
    entries: the hint names the end where the winner gains, to tune as a key of its own."""
    if ends is None or used is None or chosen[3:] == used[3:]:
        return chosen, ""
    (won_at_t, won_at_end), (used_at_t, used_at_end) = ends[chosen[3:]], ends[used[3:]]
    if won_at_t <= used_at_t * (1.0 + tolerance):
        return chosen, ""
    return used, (f" (the entry in use: the winner was {won_at_t / used_at_t - 1:.1%} slower at T itself and "
                  f"{1 - won_at_end / used_at_end:.1%} faster at the key's last T; tune a key between them)")


def _as_dict(config: MoEKernelConfig) -> dict:
    """Every field of the config (a field left out would be lost from the tables at the next tuning)."""
    return dataclasses.asdict(config)


def _write(path: Path, table: dict[str, dict]) -> None:
    """Merge the table into the file at path: token counts not tuned now keep their entries."""
    merged = json.loads(path.read_text()) if path.is_file() else {}
    merged.update(table)
    path.write_text(json.dumps(dict(sorted(merged.items(), key=lambda kv: int(kv[0]))), indent=1) + "\n")


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="gpt-oss-20b,gpt-oss-120b",
                        help=f"one shape or several, comma-separated: {', '.join(SHAPES)}")
    parser.add_argument("--format", default=None,
                        help="the experts' weight format, one every shape has (default: each shape's first)")
    parser.add_argument("--tokens", default="1,4,16,64,256,1024,4096,8192")
    parser.add_argument("--out", default=str(moe_configs.CONFIG_DIR))
    parser.add_argument("--grid", choices=GRIDS, default="small",
                        help="small: 4-12 candidates per GEMM and tile; full: gpt-oss MXFP4's original grid")
    parser.add_argument("--min-gain", type=float, default=MIN_GAIN,
                        help="write a winner only where it beats the pair in use at T by more than this fraction "
                             f"(default {MIN_GAIN}: smaller gains did not show in the model)")
    parser.add_argument("--block-m", default=None, help="comma list of tiles to try at every T (default: from T)")
    parser.add_argument("--span", action=argparse.BooleanOptionalAction, default=True,
                        help="time each T's candidates, the pair in use and the fallback at T and at the last T that "
                             "will read its key (the mean of the two; default), or at T alone (--no-span)")
    parser.add_argument("--quick", action="store_true",
                        help="few candidates: the column tile at the decode settings (with --tokens up to 64)")
    args = parser.parse_args()
    _check_args(parser, args)
    return args


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def _check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject a bad shape, format, token count or tile before any GPU work (a device call is short)."""
    for shape in args.shapes.split(","):
        if shape not in SHAPES:
            parser.error(f"--shapes: unknown shape {shape!r}; valid shapes: {', '.join(SHAPES)}")
        formats = SHAPES[shape].formats
        if args.format is not None and args.format not in formats:
            parser.error(f"--format {args.format!r}: shape {shape!r} has no such experts; valid formats for "
                         f"{shape}: {', '.join(formats)}")
    if not 0.0 <= args.min_gain < 1.0:
        parser.error(f"--min-gain {args.min_gain}: expected a fraction in [0, 1), e.g. 0.02 for 2%")
    try:
        args.tokens = _ints(args.tokens)
        args.block_m = _ints(args.block_m) if args.block_m else None
        for block_m in args.block_m or ():
            MoEKernelConfig(block_m=block_m, swap_ab=block_m < 16)  # 8 rows: transposed candidates (`_configs`)
    except (ValueError, ConfigError) as exc:
        parser.error(f"--tokens / --block-m: {exc}")


def tune_shape(shape: str, args: argparse.Namespace, device: torch.device, name: str) -> None:
    """Tune every T of one shape in one format, writing both GEMMs' files after each T."""
    spec = SHAPES[shape]
    fmt = args.format or spec.formats[0]
    weights = {"bf16": "dense"}.get(fmt, fmt)  # the config files' name of the format
    g = torch.Generator().manual_seed(0)
    ex = make_experts(spec, fmt, device, g)
    table1: dict[str, dict] = {}
    table2: dict[str, dict] = {}
    arch = device_arch(device)
    # what the engine reads at each T (its files, not --out, which may be a copy or empty), before anything is written
    in_use = {tokens: in_use_pair(shape, fmt, name, arch, moe_configs.CONFIG_DIR, tokens) for tokens in args.tokens}
    # the keys after this run (GEMM 1's file: both files get the same keys, written together)
    keys = set(args.tokens) | set(moe_configs.tuned_token_counts(spec.experts, 2 * spec.inter, spec.hidden, weights,
                                                                 name, moe_configs.CONFIG_DIR, arch, proj="gate_up"))
    for tokens in args.tokens:
        end = span_end(tokens, keys) if args.span else None
        if end is not None:
            print(f"{shape} {fmt} T={tokens}: each time the mean of T and T={end}, the last T its key serves")
        tuned, (f1, f2), used, ends = tune_tokens(ex, spec.top_k, tokens, g, grid=args.grid, quick=args.quick,
                                                  block_ms=args.block_m, in_use=in_use[tokens], span_end=end)
        fallback = moe_configs._fallback(tokens)
        best = min(tuned, (f1 + f2, f1, f2, fallback, fallback), key=lambda r: r[0])
        picked = pick(best, used, args.min_gain)
        (total, t1, t2, c1, c2), guarded = guard_key(picked, used, ends)
        table1[str(tokens)], table2[str(tokens)] = _as_dict(c1), _as_dict(c2)
        kept = (guarded or f" (the entry in use: no candidate was more than {args.min_gain:.0%} faster)"
                if (c1, c2) != best[3:] else " (the fallback: faster than every candidate)" if best is not tuned
                else "")
        in_use_text = f" | in use {used[1] * 1e6:.1f} + {used[2] * 1e6:.1f} us" if used is not None else ""
        ends_text = "".join(f" | {label} at T / T={end}: {ends[pair][0] * 1e6:.1f} / {ends[pair][1] * 1e6:.1f} us"
                            for label, pair in (("winner", best[3:]), ("in use", used[3:] if used else None))
                            if ends is not None and pair in ends)
        print(f"{shape} {fmt} T={tokens}: gemm1 {t1 * 1e6:.1f} us {_as_dict(c1)} | gemm2 {t2 * 1e6:.1f} us "
              f"{_as_dict(c2)}{kept}{in_use_text} | fallback {f1 * 1e6:.1f} + {f2 * 1e6:.1f} us{ends_text}", flush=True)
        for (n, k, proj), table in (((2 * spec.inter, spec.hidden, "gate_up"), table1),
                                    ((spec.hidden, spec.inter, "down"), table2)):
            _write(Path(args.out) / config_file_name(spec.experts, n, k, weights, name, proj), table)
    print(f"wrote the {fmt} configs of {shape} into {args.out}")


def main() -> None:
    args = _parse_args()
    device = torch.device("cuda")
    name = torch.cuda.get_device_name(device)
    for shape in args.shapes.split(","):
        tune_shape(shape, args, device, name)


if __name__ == "__main__":
    main()
