"""The FP8 MoE of a few tokens: `moe_fp8_gemv` (CUDA cores, two launches) against `fused_moe`'s tensor-core path
(quantizer, alignment, GEMM 1, quantizer, GEMM 2), each in a CUDA graph, on the GPU.

PYTHONPATH=src python3 scripts/probes/fp8_gemv_probe.py [--shapes qwen3-30b-a3b,mixtral-8x7b] [--tokens 1,2,4,8]
    [--layers 8] [--rows 8,16,32,64] [--warps 1,2,4,8] [--groups 1,2,4] [--no-sweep] [--json PATH]

Both paths return the per-assignment rows ([T, k, H], `combine=False`, as the model calls the MoE before its
fused norm). Input set i (of 8, random routing) reads layer copy i % --layers of the experts, as a decode step's
layers each read their own. The sweep varies one GEMV's (rows, warps, 128-column groups a step) with the other at
its default, then
times the best of each together. Every variant's output on set 0 is checked against the tensor-core path's (relative
error < 2e-2: bf16 rounding in a different order). Prints us a call and the experts' bytes read per us (GB/s).
A probe, not a benchmark: `quickmoe bench moe` gives the figures that count.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: the tuner's timer
from tune_moe import SETS, graph_seconds, rel_err

from quickmoe.bench.moe_experts import SHAPES, make_experts
from quickmoe.kernels import fused_moe as fused_moe_module
from quickmoe.kernels.fused_moe import fused_moe
from quickmoe.kernels.moe_fp8_gemv import Fp8GemvConfig, moe_fp8_gemv
from quickmoe.kernels.routing import route_ref


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="qwen3-30b-a3b,mixtral-8x7b")
    parser.add_argument("--tokens", type=ints, default=[1, 2, 4, 8])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--rows", type=ints, default=[8, 16, 32, 64])
    parser.add_argument("--warps", type=ints, default=[1, 2, 4, 8])
    parser.add_argument("--groups", type=ints, default=[1, 2, 4])
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    device = torch.device("cuda")
    results = []
    for name in args.shapes.split(","):
        shape = SHAPES[name]
        g = torch.Generator().manual_seed(0)
        base = make_experts(shape, "fp8", device, g)
        layers = [base.w1, base.w2, base.kwargs["w1_scales"], base.kwargs["w2_scales"]]
        copies = [layers] + [[t.clone() for t in layers] for _ in range(args.layers - 1)]
        per_expert = sum(t[0].numel() * t.element_size() for t in layers)
        for tokens in args.tokens:
            sets = []
            for _ in range(SETS):
                x = (torch.randn(tokens, shape.hidden, generator=g) * 0.5).to(device, torch.bfloat16)
                logits = torch.randn(tokens, shape.experts, generator=g).to(device)
                w, ids = route_ref(logits, shape.top_k, scoring="softmax_topk", renormalize=True)
                sets.append((x, w.to(torch.bfloat16), ids.to(torch.int32)))
            hit = sum(int(torch.unique(s[2]).numel()) for s in sets) / SETS

            def tensor_cores(i: int):
                x, w, ids = sets[i]
                w1, w2, s1, s2 = copies[i % args.layers]
                return fused_moe(x, w, ids, w1, None, w2, None, w1_scales=s1, w2_scales=s2, gate_up_group=64,
                                 activation="silu", combine=False).view(-1, shape.hidden)

            def gemv(config: Fp8GemvConfig):
                def run(i: int):
                    x, w, ids = sets[i]
                    w1, w2, s1, s2 = copies[i % args.layers]
                    return moe_fp8_gemv(x, w, ids, w1, None, s1, w2, None, s2, gate_up_group=64, activation="silu",
                                        config=config)
                return run

            original = fused_moe_module.fp8_gemv_max_tokens
            fused_moe_module.fp8_gemv_max_tokens = lambda device: 0
            try:
                reference = tensor_cores(0)
                base_s = graph_seconds(tensor_cores, SETS)
            finally:
                fused_moe_module.fp8_gemv_max_tokens = original

            def timed(config: Fp8GemvConfig) -> float | None:
                try:
                    err = rel_err(gemv(config)(0), reference)
                    if not err < 2e-2:
                        print(f"  {config}: wrong result (relative error {err:.3g})", flush=True)
                        return None
                    return graph_seconds(gemv(config), SETS)
                except Exception as exc:  # a launch the compiler or the GPU refuses: reported, not fatal
                    print(f"  {config}: failed ({type(exc).__name__}: {str(exc)[:160]})", flush=True)
                    return None

            default = Fp8GemvConfig()
            rows = {"tensor_cores": base_s, "gemv_default": timed(default)}
            best = default
            if not args.no_sweep:
                sweep = {}
                for r, wp, gr in itertools.product(args.rows, args.warps, args.groups):
                    for which in (1, 2):
                        config = dataclasses.replace(default, **{f"rows{which}": r, f"warps{which}": wp,
                                                                 f"groups{which}": gr})
                        sweep[(which, r, wp, gr)] = timed(config)
                for which in (1, 2):
                    ok = {k: v for k, v in sweep.items() if k[0] == which and v is not None}
                    if ok:
                        _, r, wp, gr = min(ok, key=ok.get)
                        best = dataclasses.replace(best, **{f"rows{which}": r, f"warps{which}": wp,
                                                            f"groups{which}": gr})
                        print(f"  GEMV {which}: best rows {r} warps {wp} groups {gr}: "
                              f"{ok[(which, r, wp, gr)] * 1e6:.2f} us (the other GEMV at its default)", flush=True)
                rows["gemv_best"] = timed(best)
                results.append(dict(shape=name, tokens=tokens, sweep={str(k): v for k, v in sweep.items()}))
            gbytes = hit * per_expert / 1e9
            line = dict(shape=name, tokens=tokens, experts_hit=hit, gbytes=gbytes, best=dataclasses.asdict(best),
                        **{k: v for k, v in rows.items()})
            results.append(line)
            if args.json:  # after every point: a call that runs out of time keeps what it measured
                Path(args.json).write_text(json.dumps(results, indent=1))
            print(f"{name} T={tokens}: " + ", ".join(
                f"{k} {v * 1e6:.2f} us ({gbytes / v:.0f} GB/s)" if v else f"{k} -" for k, v in rows.items()),
                flush=True)
    print("\n| shape | T | tensor cores (us) | GEMV default | GEMV best | best config |")
    print("|---|---|---|---|---|---|")
    for r in results:
        if "tensor_cores" in r:
            fmt = lambda v: f"{v * 1e6:.2f}" if v else "-"  # noqa: E731
            print(f"| {r['shape']} | {r['tokens']} | {fmt(r['tensor_cores'])} | {fmt(r['gemv_default'])} | "
                  f"{fmt(r.get('gemv_best'))} | {r['best']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
