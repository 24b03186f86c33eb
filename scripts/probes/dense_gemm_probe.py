"""`dense_gemm` (kernels/dense_gemm.py) against cuBLAS (`F.linear`) on gpt-oss-20b's attention projections (QKV
2880 -> 5120 and o_proj 4096 -> 2880, bf16, with biases), in CUDA graphs (us a call; weights rotate over 4 sets
so that L2 holds none of them): every candidate launch config at each row count, the best beside cuBLAS, and
the bits of every config at every row count against one reference launch (they must all be equal).

    python scripts/probes/dense_gemm_probe.py [--json PATH] [--quick]
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F

from quickmoe.bench.attention import time_in_graph
from quickmoe.kernels.dense_gemm import DenseConfig, dense_config, dense_gemm

SHAPES = {"qkv": (2880, 5120), "o_proj": (4096, 2880)}  # (K, N)
ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 8192)
SETS = 4


def _candidates(rows: int) -> list[DenseConfig]:
    out = []
    if rows <= 16:
        for bn, warps in ((32, 2), (32, 4), (64, 4), (128, 4)):
            for bk in (128, 256):
                for stages in (4, 5, 6):
                    out.append(DenseConfig(16, bn, bk, warps, stages, swap=True))
        out += [DenseConfig(16, 16, 128, 2, 5), DenseConfig(16, 32, 128, 4, 5)]
    elif rows <= 256:
        top = max(32, 1 << (rows - 1).bit_length())
        for bm in sorted({top, max(32, top // 2)}):
            for bn in (64, 128):
                for bk in (64, 128):
                    for stages in (3, 4):
                        for warps in (4, 8):
                            if bm * bn <= 64 * 128 or warps == 8:
                                out.append(DenseConfig(bm, bn, bk, warps, stages, swap=True))
        out += [DenseConfig(64, 64, 64, 4, 4), DenseConfig(64, 128, 128, 4, 4)]
    else:
        for bm, bn, warps in ((128, 128, 8), (128, 256, 8), (128, 128, 4)):
            for stages in (3, 4):
                out.append(DenseConfig(bm, bn, 64, warps, stages))
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
        results = []
        for cfg in _candidates(rows):
            us = time_in_graph(lambda i, c=cfg, xs=xs: dense_gemm(xs[i], ws[i], bs[i], c), SETS, reps) * 1e6
            results.append((us, cfg))
        results.sort(key=lambda r: r[0])
        table_cfg = dense_config(rows)
        t_table = next(us for us, cfg in results if cfg == table_cfg)
        gbs = (n * k * 2 + rows * (k + n) * 2) / (results[0][0] * 1e-6) / 1e9
        print(f"{name:6s} rows={rows:5d}: cuBLAS {t_cublas:8.2f} us; best {results[0][0]:8.2f} us ({gbs:5.0f} GB/s) "
              f"{results[0][1]}; table {t_table:8.2f} us", flush=True)
        for us, cfg in results[1:4]:
            print(f"{'':22s}{us:8.2f} us {cfg}")
        out.append({"shape": name, "rows": rows, "cublas_us": round(t_cublas, 2), "table_us": round(t_table, 2),
                    "best": [{"us": round(us, 2), "config": repr(cfg)} for us, cfg in results[:6]]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--quick", action="store_true", help="rows 1, 64 and 256 only")
    args = parser.parse_args()
    device = torch.device("cuda")
    g = torch.Generator(device="cpu").manual_seed(0)
    result = {"bits": {}, "timings": []}
    for name, (k, n) in SHAPES.items():
        result["bits"][name] = _bits(name, k, n, device, g)
    rows_list = (1, 64, 256) if args.quick else ROWS
    for name, (k, n) in SHAPES.items():
        result["timings"] += _timings(name, k, n, rows_list, device, g)
    print("\n| shape | rows | cuBLAS us | table us | best us | best config |\n|---|---|---|---|---|---|")
    for r in result["timings"]:
        print(f"| {r['shape']} | {r['rows']} | {r['cublas_us']} | {r['table_us']} | {r['best'][0]['us']} | "
              f"{r['best'][0]['config']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
