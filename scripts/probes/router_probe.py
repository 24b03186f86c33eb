"""The MoE router at decode and prefill sizes on the GPU: `router_route` (the router's GEMM and the top-k in one
Triton kernel) against the linear (cuBLAS) followed by `route`, in CUDA graphs of 16 calls over a pool of
weight copies larger than the L2 (as in the model, where a layer's router weights are read once a step), for
gpt-oss-20b, Qwen3-30B-A3B and Mixtral router shapes; a sweep of the kernel's K step and warps at T = 1; and,
for the dense projections of gpt-oss-20b at M = 1 and 64, the cuBLAS calls torch can make. Usage: python3
scripts/probes/router_probe.py (a probe, not a benchmark: the figures that count come from `quickmoe bench`).
PROBE_DRY_RUN=1 with TRITON_INTERPRET=1 checks the script on CPU at small shapes."""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from quickmoe.kernels.router import launch_router_route, router_route
from quickmoe.kernels.routing import route

DRY = os.environ.get("PROBE_DRY_RUN") == "1"
DEV = torch.device("cpu" if DRY else "cuda")
DTYPE = torch.float32 if DRY else torch.bfloat16
L2_BYTES = 1 << 20 if DRY else 60 << 20
CALLS = 2 if DRY else 16
# name: (experts, hidden, top_k, bias, scoring, renormalize)
SHAPES = {"gpt-oss-20b": (32, 2880, 4, True, "topk_softmax", False),
          "qwen3-30b-a3b": (128, 2048, 8, False, "softmax_topk", True),
          "mixtral-8x7b": (8, 4096, 2, False, "softmax_topk", True)}
TOKENS = (1, 4) if DRY else (1, 2, 8, 64, 256, 1024, 8192)


def graph_us(fns) -> float:
    """Median microseconds a call: graphs of CALLS calls each, replayed in turns."""
    if DRY:
        t0 = time.perf_counter()
        for fn in fns:
            fn()
        return (time.perf_counter() - t0) / len(fns) * 1e6
    graphs = []
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(0, len(fns), CALLS):
            for fn in fns[i:i + CALLS]:
                fn()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=stream):
                for fn in fns[i:i + CALLS]:
                    fn()
            graphs.append(g)
    torch.cuda.current_stream().wait_stream(stream)
    for i in range(10):
        graphs[i % len(graphs)].replay()
    times = []
    for i in range(max(100, 3 * len(graphs))):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        graphs[i % len(graphs)].replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3 / CALLS)
    return statistics.median(times)


def pool(make, nbytes: int) -> list:
    """Enough copies of a weight that a pass over them does not fit in the L2, rounded to whole graphs."""
    count = max(CALLS, -(-2 * L2_BYTES // nbytes))
    return [make() for _ in range(-(-count // CALLS) * CALLS)]


def router_rows() -> list[str]:
    rows = []
    for name, (experts, hidden_size, top_k, has_bias, scoring, renorm) in SHAPES.items():
        def make():
            w = torch.randn(experts, hidden_size, device=DEV, dtype=DTYPE) / hidden_size ** 0.5
            b = torch.randn(experts, device=DEV, dtype=DTYPE) if has_bias else None
            return w, b
        weights = pool(make, experts * hidden_size * 2)
        for tokens in TOKENS:
            x = torch.randn(tokens, hidden_size, device=DEV, dtype=DTYPE)
            old = graph_us([lambda w=w, b=b: route(torch.nn.functional.linear(x, w, b), top_k, scoring=scoring,
                                                   renormalize=renorm) for w, b in weights])
            new = graph_us([lambda w=w, b=b: router_route(x, w, b, top_k, scoring=scoring, renormalize=renorm)
                            for w, b in weights])
            same = torch.equal(router_route(x, *weights[0], top_k, scoring=scoring, renormalize=renorm)[1],
                               route(torch.nn.functional.linear(x, *weights[0]), top_k, scoring=scoring,
                                     renormalize=renorm)[1])
            rows.append(f"| {name} | {tokens} | {old:.2f} | {new:.2f} | {old / new:.2f}x | {same} |")
            print(rows[-1], flush=True)
    return rows


def sweep_rows(shape: str) -> list[str]:
    experts, hidden_size, top_k, has_bias, scoring, renorm = SHAPES[shape]
    weights = pool(lambda: (torch.randn(experts, hidden_size, device=DEV, dtype=DTYPE),
                            torch.randn(experts, device=DEV, dtype=DTYPE) if has_bias else None),
                   experts * hidden_size * 2)
    wide = experts > 64
    rows = []
    for tokens in ((1,) if DRY else (1, 64, 8192)):
        x = torch.randn(tokens, hidden_size, device=DEV, dtype=DTYPE)
        for block_h in ((128,) if DRY else (32, 64, 128) if wide else (64, 128, 256)):
            for split in ((4,) if DRY else (8, 16, 32) if wide else (4, 8, 12, 16, 24)):
                for warps in ((4,) if DRY else (4, 8) if wide else (2, 4)):
                    for stages in ((2,) if DRY else (2, 3)):
                        if tokens == 8192 and (warps, stages) != (4, 3):
                            continue
                        us = graph_us([lambda w=w, b=b: launch_router_route(
                            x, w, b, top_k, scoring, renorm, block_h=block_h, split=split, num_warps=warps,
                            num_stages=stages) for w, b in weights])
                        rows.append(f"| {shape} | {tokens} | {block_h} | {split} | {warps} | {stages} | {us:.2f} |")
                        print(rows[-1], flush=True)
    return rows


def dense_rows() -> list[str]:
    """o_proj (4096 -> 2880) and qkv (2880 -> 5120) of gpt-oss-20b, with bias, as torch can call cuBLAS."""
    rows = []
    for name, (n, k) in {"o_proj": (2880, 4096), "qkv": (5120, 2880)}.items():
        weights = pool(lambda: (torch.randn(n, k, device=DEV, dtype=DTYPE) / k ** 0.5,
                                torch.randn(n, device=DEV, dtype=DTYPE)), n * k * 2)
        for m in ((1,) if DRY else (1, 4, 64)):
            x = torch.randn(m, k, device=DEV, dtype=DTYPE)
            ways = {"F.linear": lambda w, b: torch.nn.functional.linear(x, w, b),
                    "mm + add": lambda w, b: torch.mm(x, w.t()) + b,
                    "mm, no bias": lambda w, b: torch.mm(x, w.t())}
            cells = []
            for way, fn in ways.items():
                cells.append(f"{way} {graph_us([lambda w=w, b=b: fn(w, b) for w, b in weights]):.2f}")
            if not DRY:
                for library in ("cublas", "cublaslt"):
                    torch.backends.cuda.preferred_blas_library(library)
                    us = graph_us([lambda w=w, b=b: ways["F.linear"](w, b) for w, b in weights])
                    cells.append(f"F.linear ({library}) {us:.2f}")
                torch.backends.cuda.preferred_blas_library("default")
            roof = n * k * 2 / 3.0e12 * 1e6
            rows.append(f"| {name} | {m} | {' / '.join(cells)} | {roof:.2f} |")
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", default="gpt-oss-20b", help=f"shapes to sweep, comma-separated: {list(SHAPES)} ('': none)")
    parser.add_argument("--no-dense", action="store_true", help="skip the dense projections")
    args = parser.parse_args()
    print("router: us a call; old = F.linear + route, new = router_route; same ids on one weight")
    print("| shape | T | old | new | old/new | same ids |\n|---|---|---|---|---|---|")
    router = router_rows()
    print("\nrouter_route K step / split / warps / stages, us a call")
    print("| shape | T | block_h | split | warps | stages | us |\n|---|---|---|---|---|---|---|")
    sweep = [row for shape in args.sweep.split(",") if shape for row in sweep_rows(shape)]
    dense = []
    if not args.no_dense:
        print("\ndense projections, us a call (roofline at 3.0 TB/s last)")
        dense = dense_rows()
    print("\n== summary")
    for line in router + sweep + dense:
        print(line)


if __name__ == "__main__":
    main()
