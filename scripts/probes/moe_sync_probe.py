"""The decode-sized MoE GEMMs by warp-level mma.sync (`moe_sync_gemm.py`, beside this probe) against the tiles the
files choose (issue 15): gpt-oss-20b's and -120b's layers at T = 1-16, where each weight is read once and the tiles
are bound by what each weight costs in instructions and by the loads in flight.

For each shape and T, on the same random routing (4 input sets): GEMM 1 and GEMM 2 each alone in a CUDA graph, as
    tuned          the file's entries for T (the engine's dispatch)
    syncW.M.K.D.S  both GEMMs by the mma.sync kernels on an alignment of 8 rows: W warps a program, M m-tiles of 16
                   weight rows a warp, K chunks of 64 columns a loop step, loads D steps ahead, K in S parts
    syncW.M.K.D.S.a  the same loads and mmas with no decode (the words' bits to the mma: wrong outputs, a bound)
    syncW.M.K.D.S.t  GEMM 2 reading a pre-tiled copy of its words (each 16-row block's step one contiguous run)
    syncW.M.K.D.S.w  chunks of 128 columns: a lane's four words of a row one 16-byte load (K a multiple of 2)
each output checked against the torch reference (max error relative to its largest value), then a table of
GEMM 1 + GEMM 2 per variant with the experts' bytes read at HBM rate (a copy timed in the run).

    PYTHONPATH=src python3 scripts/probes/moe_sync_probe.py [--shapes gpt-oss-20b,gpt-oss-120b] [--tokens 1,2,4,8,16]
        [--variants 4.1.4,4.1.2,...] [--json PATH]

A probe, not a benchmark.
"""

from __future__ import annotations

import argparse
import sys
import json
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the kernels of moe_sync_gemm.py


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="gpt-oss-20b,gpt-oss-120b")
    parser.add_argument("--tokens", default="1,2,4,8,16")
    parser.add_argument("--variants", default="4.1.4.2.1,2.1.4.2.1,4.1.2.2.2,2.1.2.2.2,4.1.1.2.3",
                        help="warps.m_tiles.k_chunks.depth.split of the mma.sync kernels")
    parser.add_argument("--k-sweep", default="",
                        help="instead: GEMM 2 alone at T = 1 on random MXFP4 experts [32, N, K/2] of these NxK shapes "
                             "(e.g. 2880x2880,5760x1440): the time against the length of K at the same bytes")
    parser.add_argument("--json")
    args = parser.parse_args()
    from quickmoe.bench.moe import measure_ceilings

    hbm = measure_ceilings(torch.device("cuda"))["hbm_gb_per_s"] * 1e9
    print(f"HBM copy rate {hbm / 1e9:.0f} GB/s", flush=True)
    variants = [tuple(v if v in ("a", "t", "w") else int(v) for v in s.split(".")) for s in args.variants.split(",")
                if s]
    if args.k_sweep:
        rows = k_sweep([tuple(int(d) for d in nk.split("x")) for nk in args.k_sweep.split(",")], variants, hbm)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
        return
    rows = []
    for shape in args.shapes.split(","):
        rows += shape_rows(shape, [int(t) for t in args.tokens.split(",")], variants)
    print("\nGEMM 1 + GEMM 2 alone, us (in a graph), % of HBM on the experts' bytes; * = fastest")
    for shape in args.shapes.split(","):
        for t in sorted({r["tokens"] for r in rows if r["shape"] == shape}):
            pairs, nbytes = {}, 0
            for r in rows:
                if r["shape"] == shape and r["tokens"] == t:
                    pairs.setdefault(r["variant"], {})[r["gemm"]] = r["us"]
                    nbytes = r["bytes"]
            total = {v: p[1] + p[2] for v, p in pairs.items() if 1 in p and 2 in p}
            best = min(total, key=total.get)
            print(f"{shape} T {t:3d}: " + "  ".join(
                f"{v} {p[1]:.1f}+{p[2]:.1f}={total[v]:.1f} ({100 * nbytes / (total[v] * 1e-6) / hbm:.0f}%)"
                f"{'*' if v == best else ''}" for v, p in pairs.items() if v in total))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def k_sweep(shapes: list[tuple[int, int]], variants: list[tuple[int, ...]], hbm: float) -> list[dict]:
    """GEMM 2 alone at T = 1 (4 assignments on 4 distinct experts of 32) for each N x K: the engine's T = 1 Triton tile
    (the H200's gpt-oss key-1 entry: 8 rows, transposed, 32 columns on 2 warps, K in 2 parts; and in 1 part) and the
    mma.sync variants, us in a graph and GB/s of the 4 experts' bytes."""
    from quickmoe.bench.attention import time_in_graph
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_configs import MoEKernelConfig
    from quickmoe.kernels.moe_gemm import moe_gemm2
    from moe_sync_gemm import moe_gemm2_sync, tile_words  # beside this probe

    device = torch.device("cuda")
    g = torch.Generator().manual_seed(0)
    rows = []
    for n, k in shapes:
        w = torch.randint(0, 256, (32, n, k // 2), generator=g, dtype=torch.uint8).to(device)
        scales = torch.randint(118, 124, (32, k // 32, n), generator=g, dtype=torch.uint8).to(device)
        bias = torch.randn(32, n, generator=g).to(torch.bfloat16).to(device)
        nbytes = 4 * (n * k // 2 + n * k // 32)
        sets = 4
        inters = [torch.randn(4, k, generator=g).to(torch.bfloat16).to(device) for _ in range(sets)]
        routes = [torch.rand(1, 4, generator=g).to(device) for _ in range(sets)]
        aligns = [moe_align(torch.randperm(32, generator=g)[:4].to(torch.int32).view(1, 4).to(device), 32, 8)
                  for _ in range(sets)]
        fns = {}
        for parts in (2, 1):
            config = MoEKernelConfig(block_m=8, block_n=32, block_k=256, num_warps=2, num_stages=3, swap_ab=True,
                                     split_k=parts)
            fns[f"triton-k{parts}"] = lambda i, c=config: moe_gemm2(inters[i], aligns[i], routes[i], w, bias, scales,
                                                                     config=c)
        for nw, mt, kb, depth, split, *flag in variants:
            kw = dict(warps=nw, m_tiles=mt, k_chunks=kb, depth=depth, split=split, ablate="a" in flag,
                      wide="w" in flag, tiled_words=tile_words(w, kb) if "t" in flag else None)
            fns[f"sync{nw}.{mt}.{kb}.{depth}.{split}" + "".join("." + f for f in flag)] = (
                lambda i, kw=kw: moe_gemm2_sync(inters[i], aligns[i], routes[i], w, bias, scales, **kw))
        for label, fn in fns.items():
            try:
                us = time_in_graph(fn, sets, 16) * 1e6
            except Exception as exc:  # noqa: BLE001 - a probe reports and goes on
                print(f"{n}x{k} {label}: {type(exc).__name__}: {str(exc)[:400]}", flush=True)
                continue
            rows.append({"n": n, "k": k, "variant": label, "us": us, "bytes": nbytes})
            print(f"N {n:6d} K {k:5d} {label:16s}: {us:7.1f} us  {nbytes / us / 1e3:7.0f} GB/s "
                  f"({100 * nbytes / (us * 1e-6) / hbm:.0f}% of HBM)", flush=True)
    return rows


def shape_rows(shape: str, token_counts: list[int], variants: list[tuple[int, ...]]) -> list[dict]:
    from quickmoe.bench.attention import time_in_graph
    from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
    from quickmoe.kernels.fused_moe import device_arch
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_configs import moe_kernel_config
    from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu, moe_gemm2
    from quickmoe.kernels.moe_gemm_register import moe_gemm1_swiglu_register_ref, moe_gemm2_register_ref
    from moe_sync_gemm import moe_gemm1_swiglu_sync, moe_gemm2_sync, tile_words  # beside this probe

    device = torch.device("cuda")
    name, arch = torch.cuda.get_device_name(device), device_arch(device)
    g = torch.Generator().manual_seed(0)
    spec = SHAPES[shape]
    ex = make_experts(spec, "mxfp4", device, g)
    w1, b1, s1 = ex.w1, ex.b1, ex.kwargs["w1_scales"]
    w2, b2, s2 = ex.w2, ex.b2, ex.kwargs["w2_scales"]
    per_expert = w1[0].numel() + s1[0].numel() + w2[0].numel() + s2[0].numel()  # bytes of one expert's weights
    rows = []
    for tokens in token_counts:
        sets = 4
        xs = [torch.randn(tokens, spec.hidden, generator=g).to(torch.bfloat16).to(device) for _ in range(sets)]
        inters = [torch.randn(tokens * spec.top_k, spec.inter, generator=g).to(torch.bfloat16).to(device)
                  for _ in range(sets)]
        routes = [torch.rand(tokens, spec.top_k, generator=g).to(device) for _ in range(sets)]
        ids = [torch.rand(tokens, spec.experts, generator=g).topk(spec.top_k, dim=1).indices.to(torch.int32)
               .to(device) for _ in range(sets)]
        distinct = sum(i.unique().numel() for i in ids) / sets
        tuned = (moe_kernel_config(spec.experts, 2 * spec.inter, spec.hidden, "mxfp4", name, tokens, arch=arch,
                                   proj="gate_up"),
                 moe_kernel_config(spec.experts, spec.hidden, spec.inter, "mxfp4", name, tokens, arch=arch,
                                   proj="down"))
        aligns = {bm: [moe_align(i, spec.experts, bm) for i in ids] for bm in {8, tuned[0].block_m}}
        ref1 = moe_gemm1_swiglu_register_ref(xs[0], aligns[8][0], spec.top_k, w1, b1, s1, GROUP, 7.0, 1.702).float()
        ref2 = moe_gemm2_register_ref(inters[0], aligns[8][0], routes[0], w2, b2, s2).float()
        bm = tuned[0].block_m
        fns = {"tuned": (
            lambda i: moe_gemm1_swiglu(xs[i], aligns[bm][i], spec.top_k, w1, b1, s1, GROUP, 7.0, 1.702,
                                       config=tuned[0]),
            lambda i: moe_gemm2(inters[i], aligns[bm][i], routes[i], w2, b2, s2, config=tuned[1]))}
        for nw, mt, kb, depth, split, *flag in variants:
            shape_kw = dict(warps=nw, m_tiles=mt, k_chunks=kb, depth=depth, split=split, ablate="a" in flag,
                            wide="w" in flag)
            kw2 = dict(shape_kw, tiled_words=tile_words(w2, kb) if "t" in flag else None)
            fns[f"sync{nw}.{mt}.{kb}.{depth}.{split}" + "".join("." + f for f in flag)] = (
                lambda i, kw=shape_kw: moe_gemm1_swiglu_sync(xs[i], aligns[8][i], spec.top_k, w1, b1, s1, GROUP, 7.0,
                                                             1.702, **kw),
                lambda i, kw=kw2: moe_gemm2_sync(inters[i], aligns[8][i], routes[i], w2, b2, s2, **kw))
        for label, pair in fns.items():
            for gemm, (fn, ref) in enumerate(zip(pair, (ref1, ref2)), start=1):
                try:
                    err = (fn(0).float() - ref).abs().max().item() / ref.abs().max().item()
                    us = time_in_graph(fn, sets, 16) * 1e6
                except Exception as exc:  # noqa: BLE001 - a probe reports and goes on
                    print(f"{shape} T {tokens} {label} GEMM {gemm}: {type(exc).__name__}: {str(exc)[:800]}",
                          flush=True)
                    continue
                rows.append({"shape": shape, "tokens": tokens, "variant": label, "gemm": gemm, "us": us,
                             "max_rel_err": err, "bytes": distinct * per_expert})
                print(f"{shape} T {tokens:3d} {label:12s} GEMM {gemm}: {us:8.1f} us  err {err:.2e}", flush=True)
    return rows


if __name__ == "__main__":
    main()
