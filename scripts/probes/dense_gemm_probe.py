"""`dense_gemm` (kernels/dense_gemm.py) against cuBLAS (`F.linear`) on gpt-oss-20b's attention projections (QKV
2880 -> 5120 and o_proj 4096 -> 2880, bf16, with biases), in CUDA graphs (us a call; weights rotate over 4 sets
so that L2 holds none of them): every candidate launch config at each row count, the best beside cuBLAS, and
the bits of every config at every row count against one reference launch (they must all be equal).

    python scripts/probes/dense_gemm_probe.py [--json PATH] [--quick] [--rows 1,16,64] [--base OLD/dense_gemm.py]
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
import torch.nn.functional as F

from quickmoe.bench.attention import time_in_graph
from quickmoe.kernels.dense_gemm import DenseConfig, dense_config, dense_gemm

SHAPES = {"qkv": (2880, 5120), "o_proj": (4096, 2880)}  # (K, N)
ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 8192)
BASE = None  # another tree's kernels/dense_gemm.py (--base): its table config timed beside, same operands
SETS = 4


def _candidates(rows: int) -> list[DenseConfig]:
    """Launch configs worth timing at this row count, with K in parts summed in one program and, for most, also
    with one program a part (`split`). Stages x (tile rows + columns) x K step bound the programs an SM holds."""
    if rows <= 16:
        out = [DenseConfig(16, bn, bk, warps, stages, swap=swap, split=True)
               for bn, warps, swap in ((16, 2, False), (32, 2, True), (32, 4, True), (64, 4, True))
               for bk in (64, 128, 256) for stages in (2, 3, 4)]
        out += [DenseConfig(16, 64, 256, 4, 5, swap=True), DenseConfig(16, 64, 128, 4, 6, swap=True),
                DenseConfig(16, 32, 256, 2, 4, swap=True)]
        # narrow tiles over all of K in one program (no partials, no ticket): o_proj's 2,880 columns give 180
        # programs of 16 columns, QKV's 5,120 give 320; deep pipelines keep a program's loads in flight
        out += [DenseConfig(16, 16, bk, warps, stages, swap=True)
                for bk, warps, stages in ((256, 1, 4), (256, 1, 6), (256, 1, 8), (128, 1, 6), (128, 1, 8),
                                          (256, 2, 4), (256, 2, 6))]
        out += [DenseConfig(16, 32, 256, warps, stages, swap=True) for warps, stages in ((1, 6), (2, 6), (2, 8))]
    elif rows <= 256:
        tiles = {64: ((32, 64, 4), (64, 64, 4), (32, 32, 4)),
                 128: ((64, 64, 4), (64, 128, 4), (128, 64, 4)),
                 256: ((128, 64, 4), (64, 64, 4), (128, 128, 8))}[max(64, 1 << (rows - 1).bit_length())]
        out = [DenseConfig(bm, bn, 128, warps, stages, swap=True, split=split)
               for bm, bn, warps in tiles for stages in (3, 4) for split in (False, True)]
    else:
        out = [DenseConfig(bm, bn, 64, warps, stages) for bm, bn, warps in ((128, 128, 8), (128, 256, 8))
               for stages in (3, 4)]
    out = [c for c in out if (c.block_m + c.block_n) * c.block_k * 2 * c.num_stages <= 200 * 1024]  # shared memory
    table = dense_config(rows)
    return out if table in out else [table, *out]


def _bits(name: str, k: int, n: int, device: torch.device, g: torch.Generator) -> dict:
    """Every config of every row count against one launch at the largest row count: rows must be bit-equal."""
    x = (torch.randn(max(ROWS), k, generator=g) * 0.5).to(device, torch.bfloat16)
    w = (torch.randn(n, k, generator=g) / k ** 0.5).to(device, torch.bfloat16)
    b = torch.randn(n, generator=g).to(device, torch.bfloat16)
    ref = dense_gemm(x, w, b, DenseConfig(128, 128, 64, 8, 3))
    exact = (x.double() @ w.double().T + b.double())
    err = ((ref.double() - exact).abs().max() / exact.abs().max()).item()
    cublas_err = ((F.linear(x, w, b).double() - exact).abs().max() / exact.abs().max()).item()
    checked, unequal = 0, []
    for rows in ROWS:
        for cfg in _candidates(rows):
            got = dense_gemm(x[:rows], w, b, cfg)
            checked += 1
            if not torch.equal(got, ref[:rows]):
                diff = (got != ref[:rows]).sum().item()
                unequal.append(f"rows={rows} {cfg}: {diff} values differ")
    print(f"bits {name}: {checked} launches checked, {len(unequal)} unlike the reference; rel. error vs float64 "
          f"{err:.2e} (cuBLAS {cublas_err:.2e})", flush=True)
    for line in unequal[:10]:
        print("   ", line)
    return {"checked": checked, "unequal": unequal, "rel_err": err, "cublas_rel_err": cublas_err}


def _timings(name: str, k: int, n: int, rows_list, device: torch.device, g: torch.Generator) -> list[dict]:
    ws = [(torch.randn(n, k, generator=g) / k ** 0.5).to(device, torch.bfloat16) for _ in range(SETS)]
    bs = [torch.randn(n, generator=g).to(device, torch.bfloat16) for _ in range(SETS)]
    out = []
    for rows in rows_list:
        xs = [torch.randn(rows, k, generator=g).to(device, torch.bfloat16) for _ in range(SETS)]
        reps = 8 if rows >= 1024 else 32
        t_cublas = time_in_graph(lambda i, xs=xs: F.linear(xs[i], ws[i], bs[i]), SETS, reps) * 1e6
        t_base = (time_in_graph(lambda i, xs=xs: BASE.dense_gemm(xs[i], ws[i], bs[i]), SETS, reps) * 1e6
                  if BASE is not None else float("nan"))
        results = []
        for cfg in _candidates(rows):
            us = time_in_graph(lambda i, c=cfg, xs=xs: dense_gemm(xs[i], ws[i], bs[i], c), SETS, reps) * 1e6
            results.append((us, cfg))
        results.sort(key=lambda r: r[0])
        table_cfg = dense_config(rows)
        t_table = next(us for us, cfg in results if cfg == table_cfg)
        gbs = (n * k * 2 + rows * (k + n) * 2) / (results[0][0] * 1e-6) / 1e9
        print(f"{name:6s} rows={rows:5d}: cuBLAS {t_cublas:8.2f} us; base {t_base:8.2f} us; best {results[0][0]:8.2f} "
              f"us ({gbs:5.0f} GB/s) {results[0][1]}; table {t_table:8.2f} us", flush=True)
        for us, cfg in results[1:4]:
            print(f"{'':22s}{us:8.2f} us {cfg}")
        out.append({"shape": name, "rows": rows, "cublas_us": round(t_cublas, 2), "base_us": round(t_base, 2),
                    "table_us": round(t_table, 2),
                    "best": [{"us": round(us, 2), "config": repr(cfg)} for us, cfg in results]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--quick", action="store_true", help="rows 1, 64 and 256 only")
    parser.add_argument("--rows", help="comma-separated row counts to time (default: all of ROWS)")
    parser.add_argument("--base", help="path of another tree's kernels/dense_gemm.py, timed beside (its table)")
    args = parser.parse_args()
    if args.base:
        import importlib.util

        global BASE
        spec = importlib.util.spec_from_file_location("base_dense_gemm", args.base)
        BASE = sys.modules["base_dense_gemm"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
        spec.loader.exec_module(BASE)
    device = torch.device("cuda")
    g = torch.Generator(device="cpu").manual_seed(0)
    result = {"bits": {}, "timings": []}
    for name, (k, n) in SHAPES.items():
        result["bits"][name] = _bits(name, k, n, device, g)
    rows_list = (1, 64, 256) if args.quick else ROWS
    if args.rows:
        rows_list = tuple(int(r) for r in args.rows.split(","))
    for name, (k, n) in SHAPES.items():
        result["timings"] += _timings(name, k, n, rows_list, device, g)
    print("\n| shape | rows | cuBLAS us | base us | table us | best us | best config |\n|---|---|---|---|---|---|---|")
    for r in result["timings"]:
        print(f"| {r['shape']} | {r['rows']} | {r['cublas_us']} | {r['base_us']} | {r['table_us']} | "
              f"{r['best'][0]['us']} | "
              f"{r['best'][0]['config']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
