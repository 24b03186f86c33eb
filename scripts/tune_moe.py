"""Tune the MoE GEMMs' launch configs on this GPU and write them as data files into kernels/configs/.

PYTHONPATH=src python3 scripts/tune_moe.py [--shapes gpt-oss-20b,gpt-oss-120b] [--tokens 1,4,...] [--out DIR]
                                           [--quick]

For each shape and token count T, each candidate BLOCK_M (the alignment's tile, shared by both GEMMs) gets
its own alignment; then every candidate of GEMM 1 (gate_up + SwiGLU) and of GEMM 2 (down) is timed alone,
replayed in a CUDA graph that holds several calls over rotating random inputs (more weight bytes than the
L2 cache holds, never zeros), median of several replays. The BLOCK_M with the smallest GEMM 1 + GEMM 2 time
wins, with each GEMM's best config for it. One file per GEMM shape is written (named by
`moe_configs.config_file_name`), mapping T to the config; token counts already in an existing file and not
tuned now are kept. Start-up never tunes: it reads these files.
Prints one line per (shape, T): the winning configs and their times, and the measured times of the
fallback configs for comparison.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
from pathlib import Path

import torch
import triton

from quickmoe.bench.moe_experts import GROUP, SHAPES, ExpertSet, make_experts
from quickmoe.kernels import moe_configs
from quickmoe.kernels.moe_align import moe_align
from quickmoe.kernels.moe_configs import MoEKernelConfig, config_file_name
from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu, moe_gemm2
from quickmoe.kernels.routing import route_ref

SETS = 8  # input sets per graph: their experts' bytes outgrow the L2 cache
CALLS = 16  # calls per graph replay


def block_m_candidates(tokens: int, top_k: int, experts: int) -> list[int]:
    """Tiles from about half to four times the mean rows per expert hit, at least 16, at most 256."""
    mean_rows = tokens * top_k / min(experts, tokens * top_k)
    return [m for m in (16, 32, 64, 128, 256) if m == 16 or mean_rows / 2 >= m / 4] [-3:]


def gemm1_candidates(block_m: int, quick: bool) -> list[MoEKernelConfig]:
    """GEMM 1's column tile is the layout's gate/up group or a part of it (more programs for decode-sized
    batches). Decode-sized tiles: deep K steps, 2 or 4 warps, both orientations, gate and up in two dots (one was
    slower there); prefill tiles: the whole group, the plain orientation (the transposed one never won there on the
    H100), 4 or 8 warps, launch order in groups of 1 or 8 M tiles, gate and up in two dots or one
    (`gate_up_one_dot`). `quick`: the column tile only, at the decode settings that won before."""
    if quick:
        grid = itertools.product((16, 32, GROUP), (256,), (4,), (3,), (False,), (1,), (False,))
    elif block_m <= 32:
        grid = itertools.product((16, 32, GROUP), (128, 256), (2, 4), (3, 4), (False, True), (1,), (False,))
    else:
        grid = itertools.product((GROUP,), (64, 128), (4, 8), (3,), (False,), (1, 8), (False, True))
    return [MoEKernelConfig(block_m=block_m, block_n=n, block_k=k, num_warps=w, num_stages=s, swap_ab=swap,
                            group_m=group, gate_up_one_dot=one_dot) for n, k, w, s, swap, group, one_dot in grid]


def gemm2_candidates(block_m: int, quick: bool) -> list[MoEKernelConfig]:
    if quick:
        grid = itertools.product((16, 32, 64), (256,), (4,), (3,), (False,), (1,))
    elif block_m <= 32:
        grid = itertools.product((16, 32, 64, 128), (128, 256), (2, 4), (3, 4), (False, True), (1,))
    else:
        grid = itertools.product((128, 256), (64, 128), (4, 8), (3,), (False,), (1, 8))
    return [MoEKernelConfig(block_m=block_m, block_n=n, block_k=k, num_warps=w, num_stages=s, swap_ab=swap,
                            group_m=group) for n, k, w, s, swap, group in grid]


def graph_seconds(fn, sets: int) -> float:
    """Seconds per call of fn(i), i over the input sets, CALLS calls per CUDA graph replay, median of 5."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(sets):
            fn(i)  # compiles outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for c in range(CALLS):
                fn(c % sets)
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / CALLS)
    return statistics.median(times)


def best_of(candidates, run) -> tuple[float, MoEKernelConfig]:
    timed = []
    for config in candidates:
        try:
            timed.append((graph_seconds(lambda i: run(i, config), SETS), config))
        except (RuntimeError, triton.runtime.errors.OutOfResources,
                triton.compiler.errors.CompilationError) as exc:  # a candidate too big for the chip
            print(f"  {config}: skipped ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})")
    return min(timed, key=lambda tc: tc[0])


def tune_tokens(ex: ExpertSet, top_k: int, tokens: int, quick: bool, g: torch.Generator):
    device = ex.w1.device
    shape, s1, s2 = ex.shape, ex.kwargs.get("w1_scales"), ex.kwargs.get("w2_scales")
    inputs = [(torch.randn(tokens, shape.hidden, generator=g).to(torch.bfloat16).to(device),
               *route_ref(torch.randn(tokens, shape.experts, generator=g).to(device), top_k)) for _ in range(SETS)]
    inter = [torch.randn(tokens * top_k, shape.inter, generator=g).to(torch.bfloat16).to(device) for _ in range(SETS)]
    results = []
    for block_m in block_m_candidates(tokens, top_k, shape.experts):
        aligns = [moe_align(ids, shape.experts, block_m) for _, _, ids in inputs]

        def gemm1(i, config):
            return moe_gemm1_swiglu(inputs[i][0], aligns[i], top_k, ex.w1, ex.b1, s1, GROUP, 7.0, 1.702,
                                    config=config, activation=shape.activation)

        def gemm2(i, config):
            return moe_gemm2(inter[i], aligns[i], inputs[i][1], ex.w2, ex.b2, s2, config=config)

        t1, c1 = best_of(gemm1_candidates(block_m, quick), gemm1)
        t2, c2 = best_of(gemm2_candidates(block_m, quick), gemm2)
        results.append((t1 + t2, t1, t2, c1, c2))
    fallback = moe_configs._fallback(tokens)
    aligns = [moe_align(ids, shape.experts, fallback.block_m) for _, _, ids in inputs]
    f1 = graph_seconds(lambda i: moe_gemm1_swiglu(inputs[i][0], aligns[i], top_k, ex.w1, ex.b1, s1, GROUP, 7.0,
                                                  1.702, config=fallback, activation=shape.activation), SETS)
    f2 = graph_seconds(lambda i: moe_gemm2(inter[i], aligns[i], inputs[i][1], ex.w2, ex.b2, s2,
                                           config=fallback), SETS)
    return min(results, key=lambda r: r[0]), (f1, f2)


def _as_dict(config: MoEKernelConfig) -> dict:
    """Every field of the config (a field left out would be lost from the tables at the next tuning)."""
    return dataclasses.asdict(config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="gpt-oss-20b,gpt-oss-120b")
    parser.add_argument("--tokens", default="1,4,16,64,256,1024,4096,8192")
    parser.add_argument("--out", default=str(moe_configs.CONFIG_DIR))
    parser.add_argument("--quick", action="store_true",
                        help="few candidates: the column tile at the decode settings (with --tokens up to 64)")
    args = parser.parse_args()
    device = torch.device("cuda")
    name = torch.cuda.get_device_name(device)
    for shape in args.shapes.split(","):
        spec = SHAPES[shape]
        hidden, inter, experts, top_k = spec.hidden, spec.inter, spec.experts, spec.top_k
        fmt = "mxfp4" if "mxfp4" in spec.formats else "bf16"  # the formats the Triton kernels run
        g = torch.Generator().manual_seed(0)
        ex = make_experts(spec, fmt, device, g)
        table1: dict[str, dict] = {}
        table2: dict[str, dict] = {}
        for tokens in (int(t) for t in args.tokens.split(",")):
            (total, t1, t2, c1, c2), (f1, f2) = tune_tokens(ex, top_k, tokens, args.quick, g)
            table1[str(tokens)], table2[str(tokens)] = _as_dict(c1), _as_dict(c2)
            print(f"{shape} T={tokens}: gemm1 {t1 * 1e6:.1f} us {_as_dict(c1)} | gemm2 {t2 * 1e6:.1f} us "
                  f"{_as_dict(c2)} | fallback {f1 * 1e6:.1f} + {f2 * 1e6:.1f} us", flush=True)
            for (n, k), table in (((2 * inter, hidden), table1), ((hidden, inter), table2)):  # after every T
                path = Path(args.out) / config_file_name(experts, n, k, "mxfp4" if fmt == "mxfp4" else "dense", name)
                merged = json.loads(path.read_text()) if path.is_file() else {}
                merged.update(table)
                path.write_text(json.dumps(dict(sorted(merged.items(), key=lambda kv: int(kv[0]))), indent=1) + "\n")
        print(f"wrote the configs of {shape} into {args.out}")


if __name__ == "__main__":
    main()
