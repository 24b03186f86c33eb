"""Small-batch decode kernels on the GPU, gpt-oss-20b shapes: the MoE on CUDA cores (`fused_moe_gemv`, a sweep
of its tiles) against the tensor-core grouped GEMMs (`fused_moe`), the dense `gemv` against F.linear on the
attention projections, the router and the LM head, and `moe_align` (one program) against `moe_align_ref` at
decode batch sizes. Every variant is checked against its reference first; times are medians of CUDA-graph
replays (3 rotating random input sets). Usage: python3 scripts/probes/small_batch_probe.py [--json PATH]
(a probe, not a benchmark: the figures that count come from `quickmoe bench`)."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time
import statistics

import torch
import torch.nn.functional as F

from quickmoe.kernels.fused_moe import fused_moe, fused_moe_ref
from quickmoe.kernels.gemv import gemv
from quickmoe.kernels.moe_align import moe_align, moe_align_ref
from quickmoe.kernels.moe_gemv import GemvConfig, fused_moe_gemv, moe_gemv1_swiglu, moe_gemv2_combine
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
    results: dict = {"moe": [], "gemv1": [], "gemv2": [], "dense": [], "align": []}
    expert_bytes = lambda t_ids: (t_ids.unique().numel() * ((2 * I * H + H * I) // 2 + (2 * I * H + H * I) // 32))

    # correctness first (bf16, against the float64 reference)
    for tokens in (1, 4):
        x, w, ids = moe_inputs(tokens, g)[0]
        want = fused_moe_ref(x.double(), w.double(), ids.long(), w1, b1.double(), w2, b2.double(), **kw)
        for name, got in (("mma", fused_moe(x, w, ids, w1, b1, w2, b2, gemv_max_tokens=0, **kw)),
                          ("gemv", fused_moe_gemv(x, w, ids, w1, b1, w2, b2, **kw))):
            err = ((got.double() - want).norm() / want.norm()).item()
            print(f"check T={tokens} {name}: rel err {err:.2e}")
            assert err < 1e-2, (name, tokens, err)

    # GEMV tile sweeps, each kernel alone, T = 1 and 4
    for tokens in (1, 4):
        sets = moe_inputs(tokens, g)
        inters = [torch.randn(tokens * K_TOP, I, generator=g).to(torch.bfloat16).to(DEV) for _ in sets]
        nbytes = statistics.mean(expert_bytes(ids) for _, _, ids in sets)
        for bn, bk, nw in itertools.product(*(((16,), (128,), (4,)) if DRY else ((8, 16, 32), (128, 256, 512), (2, 4, 8)))):
            cfg = GemvConfig(block_n1=bn, block_n2=bn, block_k=bk, num_warps=nw)
            us1 = graph_us([lambda x=x, ids=ids: moe_gemv1_swiglu(x, ids, w1, b1, s1, GROUP, 7.0, 1.702, config=cfg)
                            for x, _, ids in sets])
            us2 = graph_us([lambda a=a, w=w, ids=ids: moe_gemv2_combine(a, ids, w, w2, b2, s2, config=cfg)
                            for a, (_, w, ids) in zip(inters, sets)])
            results["gemv1"].append(dict(tokens=tokens, block_n=bn, block_k=bk, num_warps=nw, us=us1,
                                         gbs=nbytes * 2 / 3 / us1 / 1e3))
            results["gemv2"].append(dict(tokens=tokens, block_n=bn, block_k=bk, num_warps=nw, us=us2,
                                         gbs=nbytes / 3 / us2 / 1e3))
    best = {}
    for kind in ("gemv1", "gemv2"):
        for tokens in (1, 4):
            rows = sorted((r for r in results[kind] if r["tokens"] == tokens), key=lambda r: r["us"])
            best[(kind, tokens)] = rows[0]
            print(f"{kind} T={tokens} best 5: " + "; ".join(
                f"bn{r['block_n']} bk{r['block_k']} w{r['num_warps']} {r['us']:.1f}us {r['gbs']:.0f}GB/s"
                for r in rows[:5]))

    # whole MoE: the tensor-core path against the GEMV path (best T=1 tiles of each kernel)
    b1c, b2c = best[("gemv1", 1)], best[("gemv2", 1)]
    for tokens in (1, 2, 4, 8):
        sets = moe_inputs(tokens, g)
        nbytes = statistics.mean(expert_bytes(ids) for _, _, ids in sets)
        mma = graph_us([lambda x=x, w=w, ids=ids: fused_moe(x, w, ids, w1, b1, w2, b2, gemv_max_tokens=0, **kw)
                        for x, w, ids in sets])

        def gemv_path(x, w, ids):
            cfg1 = GemvConfig(block_n1=b1c["block_n"], block_k=b1c["block_k"], num_warps=b1c["num_warps"])
            cfg2 = GemvConfig(block_n2=b2c["block_n"], block_k=b2c["block_k"], num_warps=b2c["num_warps"])
            inter = moe_gemv1_swiglu(x, ids, w1, b1, s1, GROUP, 7.0, 1.702, config=cfg1)
            return moe_gemv2_combine(inter, ids, w, w2, b2, s2, config=cfg2)

        gv = graph_us([lambda x=x, w=w, ids=ids: gemv_path(x, w, ids) for x, w, ids in sets])
        results["moe"].append(dict(tokens=tokens, mma_us=mma, gemv_us=gv, gbs_mma=nbytes / mma / 1e3,
                                   gbs_gemv=nbytes / gv / 1e3))

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
            assert err < 2e-2, (name, rows, err)
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
    print("| T | tensor cores | GEMV | speed-up |")
    for r in results["moe"]:
        print(f"| {r['tokens']} | {r['mma_us']:.1f} ({r['gbs_mma']:.0f}) | {r['gemv_us']:.1f} ({r['gbs_gemv']:.0f}) "
              f"| {r['mma_us'] / r['gemv_us']:.2f}x |")
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
