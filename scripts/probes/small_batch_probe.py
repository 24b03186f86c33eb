"""Small-batch decode kernels on the GPU, gpt-oss-20b shapes: `fused_moe` at T <= 64 in CUDA graphs with the
tuned configs and with K summed in parts (split-K over programs or not), and
`moe_align` (one program) against `moe_align_ref` at decode batch sizes. Usage: python3
scripts/probes/small_batch_probe.py [--json PATH] (a probe, not a benchmark: the figures that count come from
`quickmoe bench`). Two alternatives were measured with it on 2026-11-24 and removed after their commit (1d3e728;
figures in docs/runs/2026-11-24-hotpath/small_batch_probe.log): a CUDA-core MoE for T <= 4 (0.42-0.75x of
fused_moe) and a dense Triton GEMV for one row (1.0-1.6x of cuBLAS, but it broke bf16 batch invariance: see
docs/benchmarks.md)."""

from __future__ import annotations

import argparse
import dataclasses
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

    # the MoE in a CUDA graph at small T: a sweep of block_k, warps, stages and K parts (split over programs or
    # not) at T = 1 and 4, then candidate config families at T = 1 .. 64. Configs with the same k_parts must
    # give the same bits whatever their block_k and split (the batch-invariance argument): checked below.
    from quickmoe.kernels import moe_configs

    tuned = moe_configs.moe_kernel_config

    def run_variant(fields, sets):
        moe_configs.moe_kernel_config = lambda *a: dataclasses.replace(tuned(*a), **fields)
        try:
            x, w, ids = sets[0]
            out = fused_moe(x, w, ids, w1, b1, w2, b2, **kw)
            us = graph_us([lambda x=x, w=w, ids=ids: fused_moe(x, w, ids, w1, b1, w2, b2, **kw) for x, w, ids in sets])
        finally:
            moe_configs.moe_kernel_config = tuned
        return out, us

    sweep = [dict(block_k=bk, num_warps=nw, num_stages=ns, k_parts=kp, split_k=kp > 1)
             for bk in (128, 256) for nw in (4, 8) for ns in (2, 3, 4) for kp in (1, 2, 4)]
    if DRY:
        sweep = sweep[:3]
    results["sweep"] = []
    for tokens in (1, 4):
        sets = moe_inputs(tokens, g)
        nbytes = statistics.mean(expert_bytes(ids) for _, _, ids in sets)
        for fields in sweep:
            _, us = run_variant(fields, sets)
            results["sweep"].append(dict(tokens=tokens, us=us, gbs=nbytes / us / 1e3, **fields))
    families = {"tuned": {}, "kp4 bk256": dict(k_parts=4), "kp4 bk256 split": dict(k_parts=4, split_k=True),
                "kp4 bk128": dict(k_parts=4, block_k=128), "kp4 bk128 w8": dict(k_parts=4, block_k=128, num_warps=8),
                "kp4 bk128 split": dict(k_parts=4, block_k=128, split_k=True),
                "kp4 bk128 w8 split": dict(k_parts=4, block_k=128, num_warps=8, split_k=True),
                "kp2 bk256": dict(k_parts=2), "kp2 bk128 split": dict(k_parts=2, block_k=128, split_k=True)}
    results["families"] = list(families)
    for tokens in (1, 2, 4, 8, 16, 64):
        sets = moe_inputs(tokens, g)
        nbytes = statistics.mean(expert_bytes(ids) for _, _, ids in sets)
        row = dict(tokens=tokens, gb=nbytes / 1e9)
        outs = {}
        for name, fields in families.items():
            outs[name], row[name] = run_variant(fields, sets)
        kp4 = [o for n, o in outs.items() if n.startswith("kp4")]
        kp2 = [o for n, o in outs.items() if n.startswith("kp2")]
        row["same bits"] = all(torch.equal(o, kp4[0]) for o in kp4) and all(torch.equal(o, kp2[0]) for o in kp2)
        ref = outs["tuned"].float()
        row["max rel vs tuned"] = max(float((o.float() - ref).norm() / ref.norm()) for o in outs.values())
        results["moe"].append(row)

    # alignment at decode batch sizes (E = 32, the T = 256 tuned block_m 64)
    for tokens in ((16, 80) if DRY else (64, 256, 1024)):
        ids = [route_ref(torch.randn(tokens, E, generator=g).to(DEV), K_TOP)[1] for _ in range(3)]
        new = moe_align(ids[0], E, 64)
        ref = moe_align_ref(ids[0], E, 64)
        assert torch.equal(new.sorted_ids, ref.sorted_ids) and torch.equal(new.block_expert, ref.block_expert)
        results["align"].append(dict(tokens=tokens, one_program_us=graph_us([lambda i=i: moe_align(i, E, 64) for i in ids]),
                                     ref_us=graph_us([lambda i=i: moe_align_ref(i, E, 64) for i in ids])))

    for tokens in (1, 4):
        best = sorted((r for r in results["sweep"] if r["tokens"] == tokens), key=lambda r: r["us"])[:10]
        print(f"\nMoE sweep at T={tokens}, fastest 10 (us a layer, GB/s): " + "; ".join(
            f"bk{r['block_k']} w{r['num_warps']} s{r['num_stages']} kp{r['k_parts']} {r['us']:.1f} ({r['gbs']:.0f})"
            for r in best))
    print("\nMoE, 20b layer shapes, bf16, CUDA graphs: us a layer (GB/s of the experts hit)")
    print("| T | " + " | ".join(results["families"]) + " | same bits per k_parts | max rel vs tuned |")
    for r in results["moe"]:
        cells = " | ".join(f"{r[v]:.1f} ({r['gb'] / r[v] * 1e6:.0f})" for v in results["families"])
        print(f"| {r['tokens']} | {cells} | {r['same bits']} | {r['max rel vs tuned']:.1e} |")
    print("\nmoe_align (us)")
    for r in results["align"]:
        print(f"| T={r['tokens']} | one program {r['one_program_us']:.1f} | reference {r['ref_us']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
