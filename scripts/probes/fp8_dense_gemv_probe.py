"""The FP8 dense product of a few tokens: `fp8_gemv.fp8_block_gemv` (CUDA cores) against `fp8_block_linear`'s
tensor-core kernel at its tuned config, both on activations quantized beforehand, in CUDA graphs, on the GPU.

PYTHONPATH=src python3 scripts/probes/fp8_dense_gemv_probe.py [--shapes qkv_proj,o_proj,mixtral_qkv,mixtral_o]
    [--tokens 1,2,4,8,16] [--sweep-tokens 1,8] [--rows 4,8,16] [--warps 1,2,4] [--groups 4] [--split 1,2,4]
    [--json PATH]

Shapes (K in, N out): Qwen3-30B-A3B's qkv_proj 2048 -> 5120 and o_proj 4096 -> 2048; Mixtral-8x7B's q/k/v stacked
4096 -> 6144 and o_proj 4096 -> 4096; (128, 128) block scales. Inputs rotate over sets whose weights outgrow the L2
cache (`fp8_gemm_probe.make_sets`). At each --sweep-tokens M the GEMV runs every (rows, warps, groups, split) of
the grid; elsewhere its default. Every variant's bf16 output is checked against the float64 product (max error
over the products' magnitude < 2^-7: the bf16 rounding; a wrong scale or block is of order 1; the tests bound
the float32 sums). Prints us a call and the weight bytes read per us. A probe, not a benchmark.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # fp8_gemm_probe: its timer and input sets
from fp8_gemm_probe import BLOCK, graph_us, make_sets

from quickmoe.formats.fp8 import dequantize_fp8_block, expand_block_scales
from quickmoe.kernels.fp8_gemm import FP8_GROUP, _config, fp8_block_linear
from quickmoe.kernels.fp8_gemv import Fp8DenseGemvConfig, fp8_block_gemv

SHAPES = {"qkv_proj": (2048, 5120), "o_proj": (4096, 2048), "mixtral_qkv": (4096, 6144),
          "mixtral_o": (4096, 4096)}  # name -> (K in, N out)
CALLS = 16


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def error(out: torch.Tensor, s: dict) -> float:
    """Max |out - float64 product| over the products' magnitude sum_k |x w|."""
    m, k = s["x_q"].shape
    x = s["x_q"].double() * expand_block_scales(s["x_s"], m, k, (1, FP8_GROUP)).double()
    w = dequantize_fp8_block(s["w"], s["w_s"], BLOCK, torch.float64)
    return ((out.double() - x @ w.T).abs() / (x.abs() @ w.abs().T)).max().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--tokens", type=ints, default=[1, 2, 4, 8, 16])
    parser.add_argument("--sweep-tokens", type=ints, default=[1, 8])
    parser.add_argument("--rows", type=ints, default=[4, 8, 16])
    parser.add_argument("--warps", type=ints, default=[1, 2, 4])
    parser.add_argument("--groups", type=ints, default=[4])
    parser.add_argument("--split", type=ints, default=[1, 2, 4])
    parser.add_argument("--json")
    args = parser.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    results = []
    print(f"{torch.cuda.get_device_name()}; us a call, median of graph replays of {CALLS} calls", flush=True)
    for name in args.shapes.split(","):
        k, n = SHAPES[name]
        for m in args.tokens:
            sets = make_sets(m, k, n, g)
            weight_bytes = n * k + 4 * sets[0]["w_s"].numel()

            def tensor_cores(i: int):
                s = sets[i]
                return fp8_block_linear(s["x_q"], s["x_s"], s["w"], s["w_s"], BLOCK, config=_config(m, n, k))

            def gemv(config: Fp8DenseGemvConfig):
                def run(i: int):
                    s = sets[i]
                    return fp8_block_gemv(s["x_q"], s["x_s"], s["w"], s["w_s"], BLOCK, config=config)
                return run

            def timed(fn) -> float | None:
                try:
                    err = error(fn(0), sets[0])
                    if not err < 2.0 ** -7:  # bf16 output: one rounding of at most 2^-8 of |out| <= magnitude
                        print(f"  wrong result (error {err:.3g})", flush=True)
                        return None
                    return graph_us(fn, len(sets), CALLS)
                except Exception as exc:  # a launch the compiler or the GPU refuses: reported, not fatal
                    print(f"  failed ({type(exc).__name__}: {str(exc)[:160]})", flush=True)
                    return None

            row = dict(shape=name, m=m, k=k, n=n, weight_bytes=weight_bytes, tensor_cores=timed(tensor_cores),
                       gemv_default=timed(gemv(Fp8DenseGemvConfig())))
            if m in args.sweep_tokens:
                sweep = {}
                for r, wp, gr, sp in itertools.product(args.rows, args.warps, args.groups, args.split):
                    config = Fp8DenseGemvConfig(rows=r, warps=wp, groups=gr, split_k=sp)
                    sweep[f"r{r} w{wp} g{gr} s{sp}"] = timed(gemv(config))
                ok = {c: t for c, t in sweep.items() if t is not None}
                row["sweep"] = sweep
                if ok:
                    best = min(ok, key=ok.get)
                    row["gemv_best"], row["best"] = ok[best], best
                    top = sorted(ok.items(), key=lambda ct: ct[1])[:4]
                    print("  best: " + ", ".join(f"{c} {t:.2f}" for c, t in top), flush=True)
            results.append(row)
            if args.json:  # after every point: a call that runs out of time keeps what it measured
                Path(args.json).write_text(json.dumps(results, indent=1))
            cells = [f"{key} {row[key]:.2f} us ({weight_bytes / row[key] / 1e3:.0f} GB/s)"
                     for key in ("tensor_cores", "gemv_default", "gemv_best") if row.get(key)]
            print(f"{name} M={m}: " + ", ".join(cells) + (f" [{row['best']}]" if "best" in row else ""), flush=True)
            sets.clear()  # the next point's weights replace these
            torch.cuda.empty_cache()
    print("\n| shape | M | tensor cores (us) | GEMV default | GEMV best | best config |")
    print("|---|---|---|---|---|---|")
    fmt = lambda v: f"{v:.2f}" if v else "-"  # noqa: E731
    for r in results:
        print(f"| {r['shape']} | {r['m']} | {fmt(r['tensor_cores'])} | {fmt(r['gemv_default'])} | "
              f"{fmt(r.get('gemv_best'))} | {r.get('best', '')} |")


if __name__ == "__main__":
    main()
