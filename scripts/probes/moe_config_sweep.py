"""Launch-config sweep of the MoE GEMMs at chosen T, each GEMM alone in a CUDA graph, on the GPU.

PYTHONPATH=src python3 scripts/probes/moe_config_sweep.py --tokens 1 --block-n 16,32 --block-k 256,512 \
    --warps 1,2 --stages 3,4,6 --swap 1 [--shape gpt-oss-20b] [--format mxfp4] [--proxy-half-k] [--json PATH]
    [--routing balanced] [--hot]

Times every (block_m, block_n, block_k, warps, stages, swap, group_m) of the grid for GEMM 1 (gate_up + SwiGLU)
and GEMM 2 (down) with `scripts/tune_moe.py`'s timer (a graph of 16 calls over 8 rotating random input sets,
median of 5 replays), beside the tuned config of the committed data file, and prints the fastest per GEMM.
`--format`: the experts' weight format (one of the shape's, `bench.moe_experts`): FP8 experts take FP8
activations quantized per token and 128 columns before the graph (the GEMM alone is timed; its K step is
always one 128-column scale group, so --block-k does not apply), NVFP4 ones their per-row global scales.
`--proxy-half-k`: the question "what would K split in two programs give at this T": twice the tokens (so about
twice the expert tiles) over experts whose K is 1536 instead of 2880 (GEMM 1: hidden 1536, GEMM 2:
intermediate 1536; N unchanged), i.e. the programs and K steps of a two-part split without its finish.
`--hot`: every call of the graph takes the first input set, so the experts' weights stay in L2 (when they fit):
how much of a GEMM's time is waiting on HBM. `--layers N`: N copies of the experts, input set i reading copy
i % N, as a decode step's layers each read their own experts: with N = 8 no call finds the weights an earlier call
left in L2 (random sets of few experts share some, which a step's layers never do).
A probe, not a benchmark: `quickmoe bench moe` gives the figures that count.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: the tuner's timer
from tune_moe import SETS, graph_seconds

from quickmoe.bench.moe_experts import GROUP, SHAPES, ExpertSet, MoEShape, make_experts
from quickmoe.kernels import moe_configs
from quickmoe.kernels.fused_moe import device_arch
from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group
from quickmoe.kernels.moe_align import moe_align
from quickmoe.kernels.moe_configs import MoEKernelConfig
from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu, moe_gemm2
from quickmoe.kernels.routing import route_ref


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def copy_experts(ex: ExpertSet) -> ExpertSet:
    """Another layer's experts: the same values in new memory."""
    def clone(t):
        return t.clone() if isinstance(t, torch.Tensor) else t

    return dataclasses.replace(ex, w1=clone(ex.w1), w2=clone(ex.w2), b1=clone(ex.b1), b2=clone(ex.b2),
                               kwargs={k: clone(v) for k, v in ex.kwargs.items()})


def balanced_ids(tokens: int, top_k: int, experts: int, g: torch.Generator) -> torch.Tensor:
    """[T, k] int32 expert ids, each expert (T*k)/E times when E divides T*k, labels randomly permuted."""
    perm = torch.randperm(experts, generator=g)
    slots = torch.arange(tokens * top_k).reshape(tokens, top_k) % experts  # [T, k]
    return perm[slots].to(torch.int32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="gpt-oss-20b")
    ap.add_argument("--format", default=None, help="weight format (default: the shape's first)")
    ap.add_argument("--tokens", default="1")
    ap.add_argument("--block-m", default="16")
    ap.add_argument("--block-n", default="16,32", help="GEMM 1 caps it at the gate/up group (64)")
    ap.add_argument("--block-n2", default=None, help="GEMM 2's block_n (default: --block-n)")
    ap.add_argument("--block-k", default="256")
    ap.add_argument("--warps", default="2")
    ap.add_argument("--stages", default="3")
    ap.add_argument("--swap", default="1")
    ap.add_argument("--group-m", default="1")
    ap.add_argument("--one-dot", default="0", help="GEMM 1's gate_up_one_dot values (0, 1)")
    ap.add_argument("--weight-tma", default="0",
                    help="weight_tma values (0, 1): weight tiles by TMA (one dot in GEMM 1: whole gate/up groups only)")
    ap.add_argument("--split", default="1", help="split_k values: programs per output tile over parts of K")
    ap.add_argument("--maxnreg", default="0", help="register caps per thread (0: none): a dimension of the grid; "
                    "with --tuned-only or --around-tuned, each cap on the tuned config")
    ap.add_argument("--around-tuned", action="store_true",
                    help="the tuned config of each GEMM with gate_up_one_dot and warps (4 <-> 8) varied, the stages "
                         "of --stages-around (default: the tuned) and the --split values; the other grid options are "
                         "ignored")
    ap.add_argument("--stages-around", default=None)
    ap.add_argument("--gemms", default="1,2", help="which GEMMs to time")
    ap.add_argument("--tuned-only", action="store_true",
                    help="time the committed tuned config only (with each --split value), at its own block_m")
    ap.add_argument("--proxy-half-k", action="store_true")
    ap.add_argument("--routing", choices=("random", "balanced"), default="random",
                    help="balanced: every expert gets exactly T*k/E assignments (no partial tiles when block_m "
                         "divides it): how much of a GEMM's time the experts' partial last tiles cost")
    ap.add_argument("--hot", action="store_true", help="one input set for every call (weights stay in L2)")
    ap.add_argument("--layers", type=int, default=1,
                    help="copies of the experts; input set i reads copy i %% N (a step's layers: no L2 reuse)")
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--time-tuned", action="store_true",
                    help="time the committed configs with their own tile's alignment even where --block-m differs")
    ap.add_argument("--registers", action="store_true",
                    help="print each compiled GEMM kernel's registers, spills, shared memory and occupancy by them")
    ap.add_argument("--json")
    args = ap.parse_args()
    device = torch.device("cuda")
    spec = SHAPES[args.shape]
    fmt = args.format or spec.formats[0]
    weights = {"bf16": "dense"}.get(fmt, fmt)  # the config files' name of the format
    g = torch.Generator().manual_seed(0)
    if args.proxy_half_k:
        ex1 = make_experts(MoEShape(1536, spec.inter, spec.experts, spec.top_k, spec.activation), fmt, device, g)
        ex2 = make_experts(MoEShape(spec.hidden, 1536, spec.experts, spec.top_k, spec.activation), fmt, device, g)
    else:
        ex1 = ex2 = make_experts(spec, fmt, device, g)
    layers1 = [ex1] + [copy_experts(ex1) for _ in range(args.layers - 1)]
    layers2 = layers1 if ex2 is ex1 else [ex2] + [copy_experts(ex2) for _ in range(args.layers - 1)]
    # FP8 weights multiply FP8 activations (quantized here, outside the timed graph); the others take bf16
    quantize = quantize_fp8_per_token_group if fmt == "fp8" else (lambda x: (x, None))
    name = torch.cuda.get_device_name(device)
    arch = device_arch(device)  # a device without its own files borrows its architecture's
    results = []
    for tokens in ints(args.tokens):
        t_run = 2 * tokens if args.proxy_half_k else tokens
        ids_sets = [route_ref(torch.randn(t_run, spec.experts, generator=g).to(device), spec.top_k)
                    for _ in range(SETS)]
        if args.routing == "balanced":  # token t's j-th expert: perm[(t*k + j) % E], distinct for k <= E
            ids_sets = [(w, balanced_ids(t_run, spec.top_k, spec.experts, g).to(device)) for w, _ in ids_sets]
        xs = [quantize(torch.randn(t_run, ex1.shape.hidden, generator=g).to(torch.bfloat16).to(device))
              for _ in range(SETS)]  # (activations, their scales or None)
        inter = [quantize(torch.randn(t_run * spec.top_k, ex2.shape.inter, generator=g).to(torch.bfloat16).to(device))
                 for _ in range(SETS)]
        if args.hot:  # the same experts in every call
            ids_sets, xs, inter = [ids_sets[0]] * SETS, [xs[0]] * SETS, [inter[0]] * SETS
        tuned = [moe_configs.moe_kernel_config(spec.experts, n, k, weights, name, tokens, arch=arch, proj=proj)
                 for n, k, proj in ((2 * spec.inter, spec.hidden, "gate_up"), (spec.hidden, spec.inter, "down"))]

        def runs(block_m, xs=xs, inter=inter, ids_sets=ids_sets):
            """GEMM 1 and GEMM 2 over the input sets, aligned for `block_m`-row tiles."""
            aligns = [moe_align(ids, spec.experts, block_m) for _, ids in ids_sets]

            def gemm1(i, config, aligns=aligns, xs=xs):
                ex1 = layers1[i % len(layers1)]
                return moe_gemm1_swiglu(xs[i][0], aligns[i], spec.top_k, ex1.w1, ex1.b1, ex1.kwargs.get("w1_scales"),
                                        GROUP, 7.0, 1.702, act_scales=xs[i][1], out_dtype=torch.bfloat16,
                                        config=config, activation=spec.activation,
                                        w1_row_scale=ex1.kwargs.get("w1_row_scale"))

            def gemm2(i, config, aligns=aligns, inter=inter, ids_sets=ids_sets):
                ex2 = layers2[i % len(layers2)]
                return moe_gemm2(inter[i][0], aligns[i], ids_sets[i][0], ex2.w2, ex2.b2, ex2.kwargs.get("w2_scales"),
                                 act_scales=inter[i][1], out_dtype=torch.bfloat16, config=config,
                                 w2_row_scale=ex2.kwargs.get("w2_row_scale"))

            return gemm1, gemm2

        tuned_us = [None, None]  # --time-tuned: each committed config with its own tile's alignment
        if args.time_tuned:
            for which, run in zip((1, 2), runs(tuned[0].block_m)):
                if tuned[which - 1].block_m == tuned[0].block_m:
                    tuned_us[which - 1] = graph_seconds(lambda i, c=tuned[which - 1], run=run: run(i, c), SETS)
        for block_m in ([tuned[0].block_m] if args.tuned_only or args.around_tuned else ints(args.block_m)):
            gemm1, gemm2 = runs(block_m)
            for which, run, n_list in ((1, gemm1, args.block_n), (2, gemm2, args.block_n2 or args.block_n)):
                if which not in ints(args.gemms):
                    continue
                if args.tuned_only:  # with --split: the tuned config in those parts of K
                    grid = list(dict.fromkeys([tuned[which - 1]] + [
                        dataclasses.replace(tuned[which - 1], split_k=sk, maxnreg=mr, register_operand=False)
                        for sk in ints(args.split) for mr in ints(args.maxnreg)]))  # variants of the Triton tile
                elif args.around_tuned:
                    base = dataclasses.replace(tuned[which - 1], block_m=block_m, register_operand=False)
                    grid = list(dict.fromkeys(
                        dataclasses.replace(base, gate_up_one_dot=bool(od), num_warps=w, num_stages=s,
                                            weight_tma=bool(tma), split_k=sk, maxnreg=mr)
                        for mr in ints(args.maxnreg)
                        for od in ((0, 1) if which == 1 else (0,))
                        for w in (base.num_warps, 8 if base.num_warps == 4 else 4)
                        for s in ints(args.stages_around or str(base.num_stages))
                        for tma in ints(args.weight_tma)
                        for sk in ints(args.split)))
                else:
                    grid = [MoEKernelConfig(block_m=block_m, block_n=n, block_k=k, num_warps=w, num_stages=s,
                                            swap_ab=bool(sw), group_m=gm, gate_up_one_dot=bool(od),
                                            weight_tma=bool(tma), split_k=sk, maxnreg=mr)
                            for n, k, w, s, sw, gm, od, tma, sk, mr in itertools.product(
                                ints(n_list), ints(args.block_k), ints(args.warps), ints(args.stages),
                                ints(args.swap), ints(args.group_m), ints(args.one_dot) if which == 1 else [0],
                                ints(args.weight_tma), ints(args.split), ints(args.maxnreg))
                            if sw or block_m >= 16]  # 8-row tiles: the transposed orientation only
                timed = []
                for config in grid:
                    try:
                        timed.append((graph_seconds(lambda i, c=config, run=run: run(i, c), SETS), config))
                    except Exception as exc:  # noqa: BLE001 - a probe: a config too big for the chip is skipped
                        print(f"  gemm{which} {config}: skipped ({type(exc).__name__})", flush=True)
                timed.sort(key=lambda tc: tc[0])
                ref_config = tuned[which - 1]
                ref = None
                if args.tuned_only and timed:
                    ref = next(sec for sec, c in timed if c == ref_config)  # the grid holds the tuned config
                elif ref_config.block_m == block_m:
                    ref = graph_seconds(lambda i, c=ref_config, run=run: run(i, c), SETS)
                elif tuned_us[which - 1] is not None:
                    ref = tuned_us[which - 1]
                ref_text = f"{ref * 1e6:.1f} us" if ref is not None else "other block_m"
                proxy = " (proxy: 2T, K 1536)" if args.proxy_half_k else ""
                proxy += " (hot: one input set)" if args.hot else ""
                proxy += f" ({args.layers} layers' experts)" if args.layers > 1 else ""
                print(f"{args.shape} {fmt} T={tokens}{proxy} block_m {block_m} gemm{which}: tuned {ref_text} "
                      f"({ref_config})", flush=True)
                for sec, config in timed[:args.top]:
                    print(f"  {sec * 1e6:8.1f} us  n{config.block_n} k{config.block_k} w{config.num_warps} "
                          f"s{config.num_stages} swap{int(config.swap_ab)} g{config.group_m} "
                          f"one_dot{int(config.gate_up_one_dot)} tma{int(config.weight_tma)} split{config.split_k} "
                          f"maxnreg{config.maxnreg}",
                          flush=True)
                fields = ("block_n", "block_k", "num_warps", "num_stages", "swap_ab", "group_m", "gate_up_one_dot",
                          "weight_tma", "split_k", "maxnreg")
                results.append({"shape": args.shape, "format": fmt, "tokens": tokens, "block_m": block_m, "gemm": which,
                                "proxy": args.proxy_half_k, "layers": args.layers,
                                "tuned_us": None if ref is None else ref * 1e6,
                                "timed": [{"us": sec * 1e6, **{k: getattr(c, k) for k in fields}} for sec, c in timed]})
    if args.registers:
        print_registers()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


def print_registers() -> None:
    """Each compiled variant of the two GEMM kernels: its tile, registers, spills and shared memory, and the
    programs an SM those allow (65,536 registers and 228 KiB of shared memory an SM on Hopper, 1 KiB reserved a
    program), so a register cap's effect on occupancy is read beside its time."""
    from quickmoe.kernels import moe_gemm1_kernel, moe_gemm2_kernel

    for name, fn in (("gemm1", moe_gemm1_kernel._gemm1_swiglu_kernel), ("gemm2", moe_gemm2_kernel._gemm2_kernel)):
        for cache in fn.device_caches.values():
            for kernel in cache[0].values():
                try:
                    consts = {}
                    for key, value in getattr(kernel.src, "constants", {}).items():  # keys: (argument index,)
                        index = key[0] if isinstance(key, tuple) else key
                        consts[fn.arg_names[index] if isinstance(index, int) else index] = value
                    meta = kernel.metadata
                    by_regs = 65536 // max(1, kernel.n_regs * 32 * meta.num_warps)
                    by_smem = (228 * 1024) // (meta.shared + 1024)
                    tile = " ".join(f"{k}={consts[k]}" for k in ("BLOCK_M", "BLOCK_N", "SWAP_AB", "ONE_DOT", "W_TMA")
                                    if k in consts)
                    print(f"{name}: {tile} warps {meta.num_warps} stages {meta.num_stages} maxnreg "
                          f"{getattr(meta, 'maxnreg', None)}: {kernel.n_regs} registers, {kernel.n_spills} spilled, "
                          f"{meta.shared} B shared -> {min(by_regs, by_smem)} programs an SM "
                          f"(registers {by_regs}, shared memory {by_smem})", flush=True)
                except Exception as exc:  # noqa: BLE001 - a probe's report: one unreadable kernel skips its line
                    print(f"{name}: unreadable ({type(exc).__name__}: {exc})", flush=True)


if __name__ == "__main__":
    main()
