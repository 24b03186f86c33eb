"""The register-operand MoE GEMMs (`kernels/moe_gemm_register.py`) at tiles of 8 and 16 rows beside 32 and 64, and
the Triton tiles the H200 files choose, on gpt-oss-20b's and -120b's layers at decode batches (issue 15): where an
expert gets ~2-16 assignments (the 120b at T = 64-512, the 20b at T = 16-128), which tile rows pay.

For each shape and T, on the same random routing (4 input sets): GEMM 1 and GEMM 2 each alone in a CUDA graph, as
    tuned       the file's entries for T (whatever they dispatch to), on their own alignment
    key64-triton the file's key-64 entries with their Triton tile forced (8 rows in the files that had them; the
                H200's gpt-oss-20b key 64 has been a 32-row register entry since 2026-11-30, eleventh session)
    reg8..reg64 both GEMMs by the register-operand kernels on an alignment of that many rows (3 stages; the 8- and
                16-row ones also at each of --stages, labelled sN)
    regNk2sS    (--two-steps) the same with two K steps a pipeline stage at S = 2 and 3 stages
    regNk2sSrR  (--maxnreg R) those with at most R registers a thread
each output checked against the torch reference (max error relative to its largest value), then a table of
GEMM 1 + GEMM 2 per variant, the alignment's rows in brackets.

    PYTHONPATH=src python3 scripts/probes/moe_register_rows_probe.py [--shapes gpt-oss-120b,gpt-oss-20b]
        [--tokens-120b 32,64,128,256,512] [--tokens-20b 16,32,64,128] [--two-steps 32,64] [--variants reg32,...]
        [--json PATH]

A probe, not a benchmark.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch

ROWS = (8, 16, 32, 64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="gpt-oss-120b,gpt-oss-20b")
    parser.add_argument("--tokens-120b", default="32,64,128,256,512")
    parser.add_argument("--tokens-20b", default="16,32,64,128")
    parser.add_argument("--stages", default="3,5", help="pipeline depths of the 8- and 16-row register kernels")
    parser.add_argument("--two-steps", default="",
                        help="tile rows (of 8, 16, 32, 64) also timed with two K steps a pipeline stage "
                             "(steps_per_stage 2) at 2 and 3 stages, labelled regNk2sS")
    parser.add_argument("--maxnreg", type=int, default=0,
                        help="also time each --two-steps variant with this register cap, labelled regNk2sSrR")
    parser.add_argument("--variants", default="", help="time only these labels (comma-separated; default: all)")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    for shape in args.shapes.split(","):
        tokens = args.tokens_120b if shape == "gpt-oss-120b" else args.tokens_20b
        rows += shape_rows(shape, [int(t) for t in tokens.split(",")], tuple(int(s) for s in args.stages.split(",")),
                           tuple(int(r) for r in args.two_steps.split(",") if r),
                           tuple(v for v in args.variants.split(",") if v), args.maxnreg)
    print("\nGEMM 1 + GEMM 2 alone, us (in a graph); * = fastest")
    for shape in args.shapes.split(","):
        for t in sorted({r["tokens"] for r in rows if r["shape"] == shape}):
            pairs = {}
            for r in rows:
                if r["shape"] == shape and r["tokens"] == t:
                    pairs.setdefault(r["variant"], {})[r["gemm"]] = r["us"]
            total = {v: p[1] + p[2] for v, p in pairs.items() if 1 in p and 2 in p}
            best = min(total, key=total.get)
            print(f"{shape} T {t:4d}: " + "  ".join(
                f"{v} {p[1]:.1f}+{p[2]:.1f}={total[v]:.1f}{'*' if v == best else ''}"
                for v, p in pairs.items() if v in total))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def shape_rows(shape: str, token_counts: list[int], stages: tuple[int, ...] = (3,),
               two_steps: tuple[int, ...] = (), only: tuple[str, ...] = (), maxnreg: int = 0) -> list[dict]:
    from quickmoe.bench.attention import time_in_graph
    from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
    from quickmoe.kernels.fused_moe import device_arch
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_configs import moe_kernel_config
    from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu, moe_gemm2
    from quickmoe.kernels.moe_gemm_register import (
        moe_gemm1_swiglu_register,
        moe_gemm1_swiglu_register_ref,
        moe_gemm2_register,
        moe_gemm2_register_ref,
    )

    device = torch.device("cuda")
    name, arch = torch.cuda.get_device_name(device), device_arch(device)
    g = torch.Generator().manual_seed(0)
    spec = SHAPES[shape]
    ex = make_experts(spec, "mxfp4", device, g)
    w1, b1, s1 = ex.w1, ex.b1, ex.kwargs["w1_scales"]
    w2, b2, s2 = ex.w2, ex.b2, ex.kwargs["w2_scales"]
    rows = []
    for tokens in token_counts:
        sets = 4
        xs = [torch.randn(tokens, spec.hidden, generator=g).to(torch.bfloat16).to(device) for _ in range(sets)]
        inters = [torch.randn(tokens * spec.top_k, spec.inter, generator=g).to(torch.bfloat16).to(device)
                  for _ in range(sets)]
        routes = [torch.rand(tokens, spec.top_k, generator=g).to(device) for _ in range(sets)]
        ids = [torch.rand(tokens, spec.experts, generator=g).topk(spec.top_k, dim=1).indices.to(torch.int32)
               .to(device) for _ in range(sets)]

        def configs(key: int):
            return (moe_kernel_config(spec.experts, 2 * spec.inter, spec.hidden, "mxfp4", name, key, arch=arch,
                                      proj="gate_up"),
                    moe_kernel_config(spec.experts, spec.hidden, spec.inter, "mxfp4", name, key, arch=arch,
                                      proj="down"))

        tuned = configs(tokens)
        key64 = tuple(dataclasses.replace(c, register_operand=False) for c in configs(64))
        aligns = {bm: [moe_align(i, spec.experts, bm) for i in ids] for bm in {*ROWS, tuned[0].block_m}}
        ref1 = moe_gemm1_swiglu_register_ref(xs[0], aligns[64][0], spec.top_k, w1, b1, s1, GROUP, 7.0, 1.702).float()
        ref2 = moe_gemm2_register_ref(inters[0], aligns[64][0], routes[0], w2, b2, s2).float()
        variants = {}
        for label, (c1, c2) in (("tuned", tuned), ("key64-triton", key64)):
            bm = c1.block_m
            variants[label] = (bm, (
                lambda i, c1=c1, bm=bm: moe_gemm1_swiglu(xs[i], aligns[bm][i], spec.top_k, w1, b1, s1, GROUP, 7.0,
                                                         1.702, config=c1),
                lambda i, c2=c2, bm=bm: moe_gemm2(inters[i], aligns[bm][i], routes[i], w2, b2, s2, config=c2)))
        register = [(bm, st) for bm in ROWS for st in (stages if bm <= 16 else (3,))]
        for bm, st in register:
            variants[f"reg{bm}" + ("" if st == 3 else f"s{st}")] = (bm, (
                lambda i, bm=bm, st=st: moe_gemm1_swiglu_register(
                    xs[i], aligns[bm][i], spec.top_k, w1, b1, s1, GROUP, 7.0, 1.702, stages=st),
                lambda i, bm=bm, st=st: moe_gemm2_register(inters[i], aligns[bm][i], routes[i], w2, b2, s2,
                                                           stages=st)))
        for bm in two_steps:
            for st in (2, 3):
                for cap in (None, maxnreg or None) if maxnreg else (None,):
                    variants[f"reg{bm}k2s{st}" + (f"r{cap}" if cap else "")] = (bm, (
                        lambda i, bm=bm, st=st, cap=cap: moe_gemm1_swiglu_register(
                            xs[i], aligns[bm][i], spec.top_k, w1, b1, s1, GROUP, 7.0, 1.702, stages=st,
                            steps_per_stage=2, maxnreg=cap),
                        lambda i, bm=bm, st=st, cap=cap: moe_gemm2_register(inters[i], aligns[bm][i], routes[i], w2,
                                                                            b2, s2, stages=st, steps_per_stage=2,
                                                                            maxnreg=cap)))
        for label, (bm, fns) in variants.items():
            if only and label not in only:
                continue
            for gemm, (fn, ref) in enumerate(zip(fns, (ref1, ref2)), start=1):
                try:
                    err = (fn(0).float() - ref).abs().max().item() / ref.abs().max().item()
                    us = time_in_graph(fn, sets, 16) * 1e6
                except Exception as exc:  # noqa: BLE001 - a probe reports and goes on
                    print(f"{shape} T {tokens} {label} GEMM {gemm}: {type(exc).__name__}: {str(exc)[:600]}",
                          flush=True)
                    continue
                rows.append({"shape": shape, "tokens": tokens, "variant": label, "block_m": bm, "gemm": gemm,
                             "us": us, "max_rel_err": err})
                print(f"{shape} T {tokens:4d} {label:12s} (rows {bm:2d}) GEMM {gemm}: {us:8.1f} us  err {err:.2e}",
                      flush=True)
    return rows


if __name__ == "__main__":
    main()
