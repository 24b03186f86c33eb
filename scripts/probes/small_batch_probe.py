"""Small-batch decode kernels on the GPU, gpt-oss-20b shapes: `fused_moe` at T <= 8 in CUDA graphs, and
`moe_align` (one program) against `moe_align_ref` at decode batch sizes. Usage: python3
scripts/probes/small_batch_probe.py [--json PATH] (a probe, not a benchmark: the figures that count come from
`quickmoe bench`). Two alternatives were measured with it on 2026-11-24 and removed after their commit (1d3e728;
figures in docs/runs/2026-11-24-hotpath/small_batch_probe.log): a CUDA-core MoE for T <= 4 (0.42-0.75x of
fused_moe) and a dense Triton GEMV for one row (1.0-1.6x of cuBLAS, but it broke bf16 batch invariance: see
docs/benchmarks.md)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

from quickmoe.kernels.fused_moe import fused_moe
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
    results: dict = {"moe": [], "align": []}
    expert_bytes = lambda t_ids: (t_ids.unique().numel() * ((2 * I * H + H * I) // 2 + (2 * I * H + H * I) // 32))

    # the MoE in a CUDA graph at small T (reference figures for the dense rows below)
    for tokens in (1, 2, 4, 8):
        sets = moe_inputs(tokens, g)
        nbytes = statistics.mean(expert_bytes(ids) for _, _, ids in sets)
        mma = graph_us([lambda x=x, w=w, ids=ids: fused_moe(x, w, ids, w1, b1, w2, b2, **kw) for x, w, ids in sets])
        results["moe"].append(dict(tokens=tokens, mma_us=mma, gbs_mma=nbytes / mma / 1e3))

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
    print("\nmoe_align (us)")
    for r in results["align"]:
        print(f"| T={r['tokens']} | one program {r['one_program_us']:.1f} | reference {r['ref_us']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
