"""The FP8 block-scaled dense GEMM (kernels/fp8_gemm.py) against today's dequantize + F.linear and the bf16 F.linear,
at Qwen3-30B-A3B's dense shapes, on the GPU; with --sweep, launch configs per token count, to tune `_config`.

PYTHONPATH=src python3 scripts/probes/fp8_gemm_probe.py [--tokens 1,8,64,256,1024,4096,8192] [--shapes qkv_proj,o_proj]
                                                        [--sweep] [--calls 16] [--json PATH]

Shapes (Qwen3-30B-A3B: hidden 2048, 32 query heads and 4 KV heads of 128): qkv_proj 2048 -> 4096 + 512 + 512 = 5120,
o_proj 4096 -> 2048; weights FP8 with (128, 128) float32 block scales, activations bf16 [M, K]. Variants, per M:
- fp8: `fp8_quant_block_linear`, the quantizer's launch then the GEMM (what Fp8BlockLinearMethod.apply runs on
  CUDA);
- fp8 kernel: `fp8_block_linear` alone, on activations quantized beforehand;
- dequant: `dequantize_fp8_block` to bf16 + F.linear (the path before the kernel, still the CPU one);
- bf16: F.linear on the dequantized bf16 weight (the bf16 baseline). No torch._scaled_mm variant.
Each is timed in a CUDA graph of --calls calls over rotating input sets whose weights outgrow the L2 cache (never
zeros), median of 5 replays, in microseconds per call; TFLOP/s (2 M N K) and GB/s of FP8 weight bytes for the fp8
variants. The error check compares the kernel (float32 and bf16 output) with the float64 product of the dequantized
operands: max abs error, and max error over sum_k |x_k w_k| (the float32-accumulation scale of the tests).
--sweep times the fp8 variant (quantizer included) at each candidate config (BLOCK_M, BLOCK_N, warps, stages,
orientation, split_k) and prints the best per (shape, M) beside `_config`'s choice, then the best per M
summed over the shapes. A probe, not a
benchmark: the figures that count come from `quickmoe bench`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics

import torch
import torch.nn.functional as F

from quickmoe.formats.fp8 import dequantize_fp8_block, expand_block_scales, quantize_fp8_block
from quickmoe.kernels.fp8_gemm import FP8_GROUP, Fp8GemmConfig, _config, fp8_block_linear, fp8_quant_block_linear
from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group

SHAPES = {"qkv_proj": (2048, 5120), "o_proj": (4096, 2048)}  # name -> (K in, N out)
BLOCK = (128, FP8_GROUP)
REPLAYS = 5


def graph_us(fn, sets: int, calls: int) -> float:
    """Microseconds per call of fn(i), i over the input sets, `calls` calls per CUDA graph replay, median of 5."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(sets):
            fn(i)  # compiles and warms up outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for c in range(calls):
                fn(c % sets)
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    times = []
    for _ in range(REPLAYS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)


def make_sets(m: int, k: int, n: int, g: torch.Generator) -> list[dict]:
    """Input sets: together more FP8 weight bytes than three L2 caches (at least 2 sets, at most 16)."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    count = max(2, min(16, math.ceil(3 * l2 / (n * k))))
    sets = []
    for _ in range(count):
        w = torch.randn(n, k, generator=g, device="cuda") * k ** -0.5
        w *= torch.exp(torch.randn(n, 1, generator=g, device="cuda") * 0.5)  # rows of varied magnitude
        w_q, w_s = quantize_fp8_block(w, BLOCK)
        x = torch.randn(m, k, generator=g, device="cuda") * torch.exp(torch.randn(m, 1, generator=g, device="cuda"))
        x = x.to(torch.bfloat16)
        x_q, x_s = quantize_fp8_per_token_group(x, FP8_GROUP)
        sets.append(dict(x=x, x_q=x_q, x_s=x_s, w=w_q, w_s=w_s,
                         w_bf16=dequantize_fp8_block(w_q, w_s, BLOCK, torch.bfloat16)))
    return sets


def variants(sets: list[dict]) -> dict:
    def fp8(i):
        s = sets[i]
        return fp8_quant_block_linear(s["x"], s["w"], s["w_s"], BLOCK)

    def fp8_kernel(i):
        s = sets[i]
        return fp8_block_linear(s["x_q"], s["x_s"], s["w"], s["w_s"], BLOCK)

    def dequant(i):
        s = sets[i]
        return F.linear(s["x"], dequantize_fp8_block(s["w"], s["w_s"], BLOCK, torch.bfloat16))

    def bf16(i):
        s = sets[i]
        return F.linear(s["x"], s["w_bf16"])

    return {"fp8": fp8, "fp8 kernel": fp8_kernel, "dequant": dequant, "bf16": bf16}


def check_error(s: dict) -> dict:
    """The kernel against the float64 product of the dequantized operands."""
    m, k = s["x_q"].shape
    x = s["x_q"].double() * expand_block_scales(s["x_s"], m, k, (1, FP8_GROUP)).double()
    w = dequantize_fp8_block(s["w"], s["w_s"], BLOCK, torch.float64)
    want = x @ w.T
    magnitude = x.abs() @ w.abs().T
    out = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        err = (fp8_block_linear(s["x_q"], s["x_s"], s["w"], s["w_s"], BLOCK, out_dtype=dtype).double() - want).abs()
        out[name] = dict(max_abs=err.max().item(), max_over_magnitude=(err / magnitude).max().item(),
                         rel_norm=(err.norm() / want.norm()).item())
    return out


def candidates(m: int) -> list[Fp8GemmConfig]:
    """Decode: 16-token tiles, transposed (fp8 wgmma) with K in 1-8 parts, and the plain orientation (at BLOCK_M 16
    it compiles to fp16 mma.sync) in one part; middle: 32 / 64; prefill: 64 / 128 x 64..256 (not 128 x 256: it
    spills)."""
    if m <= 16:
        grid = [(16, bn, 4, stages, True, split) for bn, stages, split
                in itertools.product((32, 64, 128), (4, 6), (1, 2, 4, 8))]
        grid += [(16, bn, 4, 6, False, 1) for bn in (32, 64)]
    elif m <= 64:
        grid = [(32, bn, 4, 4, True, split) for bn, split in itertools.product((64, 128), (1, 2, 4))]
        grid += [(bm, bn, 4, 4, False, 1) for bm, bn in itertools.product((32, 64), (64, 128))]
    else:
        grid = [c + (1,) for c in itertools.product((64, 128), (64, 128, 256), (4, 8), (3, 4), (False,))
                if c[:2] != (128, 256)]
    return [Fp8GemmConfig(*c) for c in grid]


def sweep(sets: list[dict], m: int, calls: int) -> list[tuple[float, Fp8GemmConfig]]:
    import triton

    timed = []
    for config in candidates(m):
        def run(i, config=config):
            s = sets[i]
            return fp8_quant_block_linear(s["x"], s["w"], s["w_s"], BLOCK, config=config)
        try:
            timed.append((graph_us(run, len(sets), calls), config))
        except (RuntimeError, triton.runtime.errors.OutOfResources,
                triton.compiler.errors.CompilationError) as exc:  # a candidate too big for the chip
            print(f"    {config}: skipped ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})")
    return sorted(timed, key=lambda tc: tc[0])


def fmt(config: Fp8GemmConfig) -> str:
    return (f"BM{config.block_m} BN{config.block_n} w{config.num_warps} s{config.num_stages}"
            f"{' swap' if config.swap_ab else ''}{f' split{config.split_k}' if config.split_k > 1 else ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", default="1,8,64,256,1024,4096,8192", help="M values, comma-separated")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"of {list(SHAPES)}")
    parser.add_argument("--sweep", action="store_true", help="time the candidate configs of each M; print the best")
    parser.add_argument("--calls", type=int, default=16, help="calls per CUDA graph replay")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    tokens = [int(t) for t in args.tokens.split(",")]
    shapes = args.shapes.split(",")
    print(f"{torch.cuda.get_device_name()}; us per call, median of {REPLAYS} graph replays of {args.calls} calls")
    g = torch.Generator(device="cuda").manual_seed(0)
    rows, best_by_m = [], {}
    header = (f"{'shape':>9} {'M':>5} {'fp8':>9} {'fp8 kern':>9} {'dequant':>9} {'bf16':>9}  {'TFLOP/s':>8} "
              f"{'W GB/s':>7}  {'err fp32 (max, /mag)':>22} {'err bf16 max':>12}  config")
    print(header)
    for name in shapes:
        k, n = SHAPES[name]
        for m in tokens:
            sets = make_sets(m, k, n, g)
            us = {v: graph_us(fn, len(sets), args.calls) for v, fn in variants(sets).items()}
            err = check_error(sets[0])
            flops, weight_bytes = 2 * m * n * k, n * k + 4 * sets[0]["w_s"].numel()
            row = dict(shape=name, m=m, k=k, n=n, us=us, tflops=flops / us["fp8"] / 1e6,
                       weight_gbs=weight_bytes / us["fp8"] / 1e3, error=err, config=fmt(_config(m, n, k)))
            print(f"{name:>9} {m:>5} {us['fp8']:9.1f} {us['fp8 kernel']:9.1f} {us['dequant']:9.1f} {us['bf16']:9.1f}"
                  f"  {row['tflops']:8.1f} {row['weight_gbs']:7.0f}  {err['fp32']['max_abs']:10.2e} "
                  f"{err['fp32']['max_over_magnitude']:10.2e} {err['bf16']['max_abs']:12.2e}  {row['config']}")
            if args.sweep:
                timed = sweep(sets, m, args.calls)
                row["sweep"] = [(t, fmt(c)) for t, c in timed]
                for t, c in timed[:3]:
                    print(f"    {t:9.1f} us  {fmt(c)}")
                print(f"    default {us['fp8']:9.1f} us  {row['config']}; best {timed[0][0]:.1f} us "
                      f"({us['fp8'] / timed[0][0]:.2f}x)")
                for t, c in timed:
                    best_by_m.setdefault(m, {}).setdefault(fmt(c), []).append(t)
            rows.append(row)
            del sets
            torch.cuda.empty_cache()
    if best_by_m:
        print("best config per M over all shapes (sum of the shapes' us; only configs timed in every shape):")
        for m, by_config in best_by_m.items():
            total = {c: sum(ts) for c, ts in by_config.items() if len(ts) == len(shapes)}
            if total:
                c = min(total, key=total.get)
                print(f"  M {m:>5}: {c}  ({total[c]:.1f} us)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
