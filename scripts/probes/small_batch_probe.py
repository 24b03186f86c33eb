"""Small-batch decode kernels on the GPU, gpt-oss-20b shapes: `fused_moe` at T <= 8, the dense `gemv` against
F.linear on the attention projections, the router and the LM head (a tile sweep), and `moe_align` (one program)
against `moe_align_ref` at decode batch sizes. (A CUDA-core MoE for T <= 4, `moe_gemv.py`, was measured here
against `fused_moe` on 2026-11-24 and lost, 0.42-0.75x: docs/runs/2026-11-24-hotpath/small_batch_probe.log;
removed after that commit.) Every variant is checked against its reference first; times are medians of CUDA-graph
replays (3 rotating random input sets). Usage: python3 scripts/probes/small_batch_probe.py [--json PATH]
(a probe, not a benchmark: the figures that count come from `quickmoe bench`)."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F

from quickmoe.kernels.fused_moe import fused_moe
from quickmoe.kernels.gemv import gemv
from quickmoe.kernels.moe_align import moe_align, moe_align_ref
from quickmoe.kernels.routing import route_ref

DRY = os.environ.get("PROBE_DRY_RUN") == "1"  # CPU (TRITON_INTERPRET=1), small shapes: checks the script only
DEV = torch.device("cpu" if DRY else "cuda")
E, H, I, K_TOP, GROUP = (8, 96, 128, 4, 64) if DRY else (32, 2880, 2880, 4, 64)


def graph_us(fns, iters=200, warmup=20):
    """Median microseconds of replaying one CUDA graph per fn (rotating)."""
    if DRY:
        t0 = time.perf_counter()
        for fn in fns:
            fn()
        return (time.perf_counter() - t0) / len(fns) * 1e6
    graphs = []
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for fn in fns:
            fn()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=stream):
                fn()
            graphs.append(g)
    torch.cuda.current_stream().wait_stream(stream)
    for i in range(warmup):
        graphs[i % len(graphs)].replay()
    times = []
    for i in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        graphs[i % len(graphs)].replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def moe_inputs(tokens, g):
    out = []
    for _ in range(3):
        x = torch.randn(tokens, H, generator=g).to(torch.bfloat16).to(DEV)
        w, ids = route_ref(torch.randn(tokens, E, generator=g).to(DEV), K_TOP)
        out.append((x, w, ids))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    g = torch.Generator().manual_seed(0)
    w1 = torch.randint(0, 256, (E, 2 * I, H // 2), dtype=torch.uint8, generator=g).to(DEV)
    s1 = torch.randint(118, 124, (E, H // 32, 2 * I), dtype=torch.uint8, generator=g).to(DEV)
    w2 = torch.randint(0, 256, (E, H, I // 2), dtype=torch.uint8, generator=g).to(DEV)
    s2 = torch.randint(118, 124, (E, I // 32, H), dtype=torch.uint8, generator=g).to(DEV)
    b1 = (torch.randn(E, 2 * I, generator=g) * 0.1).to(torch.bfloat16).to(DEV)
    b2 = (torch.randn(E, H, generator=g) * 0.1).to(torch.bfloat16).to(DEV)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=GROUP)
    results: dict = {"moe": [], "dense": [], "align": []}
    expert_bytes = lambda t_ids: (t_ids.unique().numel() * ((2 * I * H + H * I) // 2 + (2 * I * H + H * I) // 32))

    # the MoE in a CUDA graph at small T (reference figures for the dense rows below)
    for tokens in (1, 2, 4, 8):
        sets = moe_inputs(tokens, g)
        nbytes = statistics.mean(expert_bytes(ids) for _, _, ids in sets)
        mma = graph_us([lambda x=x, w=w, ids=ids: fused_moe(x, w, ids, w1, b1, w2, b2, **kw) for x, w, ids in sets])
        results["moe"].append(dict(tokens=tokens, mma_us=mma, gbs_mma=nbytes / mma / 1e3))

    # dense projections at batch 1..4: F.linear (cuBLAS) against gemv
    shapes = {"qkv": (5120, 2880, True), "o_proj": (2880, 4096, True), "router": (32, 2880, True),
              "lm_head": (201088, 2880, False)}
    if DRY:
        shapes = {"qkv": (40, 96, True), "lm_head": (64, 96, False)}
    for name, (n, k, has_bias) in shapes.items():
        weight = (torch.randn(n, k, generator=g) * 0.02).to(torch.bfloat16).to(DEV)
        bias = torch.randn(n, generator=g).to(torch.bfloat16).to(DEV) if has_bias else None
        tiles = None  # the rows = 1 sweep's best, reused for 2 and 4 rows
        for rows in (1, 2, 4):
            xs = [torch.randn(rows, k, generator=g).to(torch.bfloat16).to(DEV) for _ in range(3)]
            err = ((gemv(xs[0], weight, bias).float() - F.linear(xs[0].float(), weight.float(),
                                                                  None if bias is None else bias.float())).norm()
                   / F.linear(xs[0].float(), weight.float()).norm()).item()
            assert err < (5e-2 if DRY else 2e-2), (name, rows, err)  # the interpreter truncates to bf16
            cublas = graph_us([lambda x=x: F.linear(x, weight, bias) for x in xs])
            variants = {}
            for bn, bk, nw in [tiles] if tiles else itertools.product((8, 16, 32), (256, 512), (4, 8)):
                variants[(bn, bk, nw)] = graph_us(
                    [lambda x=x: gemv(x, weight, bias, block_n=bn, block_k=bk, num_warps=nw) for x in xs])
            (bn, bk, nw), us = min(variants.items(), key=lambda kv: kv[1])
            tiles = (bn, bk, nw)
            results["dense"].append(dict(name=name, rows=rows, cublas_us=cublas, gemv_us=us, block_n=bn,
                                         block_k=bk, num_warps=nw, gbs_gemv=n * k * 2 / us / 1e3,
                                         gbs_cublas=n * k * 2 / cublas / 1e3))

    # alignment at decode batch sizes (E = 32, the T = 256 tuned block_m 64)
    for tokens in ((16, 80) if DRY else (64, 256, 1024)):
        ids = [route_ref(torch.randn(tokens, E, generator=g).to(DEV), K_TOP)[1] for _ in range(3)]
        new = moe_align(ids[0], E, 64)
        ref = moe_align_ref(ids[0], E, 64)
        assert torch.equal(new.sorted_ids, ref.sorted_ids) and torch.equal(new.block_expert, ref.block_expert)
        results["align"].append(dict(tokens=tokens, one_program_us=graph_us([lambda i=i: moe_align(i, E, 64) for i in ids]),
                                     ref_us=graph_us([lambda i=i: moe_align_ref(i, E, 64) for i in ids])))

    print("\nMoE, 20b layer shapes, bf16, CUDA graphs (us; GB/s of the experts hit)")
    print("| T | fused_moe |")
    for r in results["moe"]:
        print(f"| {r['tokens']} | {r['mma_us']:.1f} ({r['gbs_mma']:.0f}) |")
    print("\nDense projections (us; GB/s of the weight)")
    print("| op | rows | cuBLAS | gemv (tiles) | speed-up |")
    for r in results["dense"]:
        print(f"| {r['name']} | {r['rows']} | {r['cublas_us']:.1f} ({r['gbs_cublas']:.0f}) | {r['gemv_us']:.1f} "
              f"({r['gbs_gemv']:.0f}; bn{r['block_n']} bk{r['block_k']} w{r['num_warps']}) | "
              f"{r['cublas_us'] / r['gemv_us']:.2f}x |")
    print("\nmoe_align (us)")
    for r in results["align"]:
        print(f"| T={r['tokens']} | one program {r['one_program_us']:.1f} | reference {r['ref_us']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
