"""Where fused_moe's time goes at small T, per kernel (torch profiler, CUDA time), for the gpt-oss shapes.

PYTHONPATH=src python3 scripts/probes/moe_kernel_split_probe.py [--shapes gpt-oss-20b,gpt-oss-120b] [--tokens 1,16]
    [--format mxfp4|fp8|nvfp4|bf16]

Runs fused_moe (the serving path: tuned configs, combine) on random experts (MXFP4 unless --format says) over
rotating routings, under
the profiler, and prints each kernel's mean CUDA time per call. A probe for what `quickmoe bench moe`'s
graph time is made of; the benchmark gives the figures that count.
"""

from __future__ import annotations

import argparse
import collections

import torch
from torch.profiler import ProfilerActivity, profile

from quickmoe.bench.moe_experts import SHAPES, make_experts
from quickmoe.kernels.routing import route_ref

CALLS = 24


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="gpt-oss-20b,gpt-oss-120b")
    ap.add_argument("--tokens", default="1,16")
    ap.add_argument("--format", default="mxfp4", help="the experts' format, one the shapes support (bench moe's)")
    args = ap.parse_args()
    device = torch.device("cuda")
    g = torch.Generator().manual_seed(0)
    for name in args.shapes.split(","):
        spec = SHAPES[name]
        ex = make_experts(spec, args.format, device, g)
        run = ex.run(kernel=True)
        for tokens in (int(t) for t in args.tokens.split(",")):
            sets = [(torch.randn(tokens, spec.hidden, generator=g).to(torch.bfloat16).to(device),
                     *route_ref(torch.randn(tokens, spec.experts, generator=g).to(device), spec.top_k))
                    for _ in range(8)]
            for x, w, ids in sets:  # compile and warm
                run(x, w, ids)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for i in range(CALLS):
                    x, w, ids = sets[i % len(sets)]
                    run(x, w, ids)
                torch.cuda.synchronize()
            per_kernel: collections.Counter = collections.Counter()
            for event in prof.events():
                if event.device_type == torch.autograd.DeviceType.CUDA:
                    per_kernel[event.name[:60]] += event.device_time / CALLS
            total = sum(per_kernel.values())
            print(f"{name} T={tokens}: {total:.1f} us of kernels a call: "
                  + "; ".join(f"{us:.1f} {kernel}" for kernel, us in per_kernel.most_common(8)), flush=True)


if __name__ == "__main__":
    main()
