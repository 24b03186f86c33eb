"""One warmed call of the serving MoE (`fused_moe` through `bench.moe_experts`, tuned configs) at one T, between
cudaProfilerStart and Stop, for Nsight Compute (`ncu --profile-from-start off`); with `--reference`, then one
`torch._scaled_mm` (FP8, per-tensor scales) of each GEMM's whole shape as a dense matmul (T x k rows), the rate
`bench moe` calls the FP8 matmul ceiling, so the two read side by side (issue 18: where the FP8 GEMMs lose to it).

    PYTHONPATH=src ncu --profile-from-start off --kernel-name regex:'gemm|sm90' ... \\
        python3 scripts/probes/moe_ncu_probe.py [--shape qwen3-30b-a3b] [--format fp8] [--tokens 8192] [--reference]

Nothing is timed here. A probe, not a benchmark.
"""

from __future__ import annotations

import argparse

import torch


def main() -> None:
    from quickmoe.bench.moe_experts import SHAPES, make_experts
    from quickmoe.kernels.routing import route_ref

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="qwen3-30b-a3b")
    parser.add_argument("--format", default="fp8")
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--reference", action="store_true",
                        help="also one torch._scaled_mm of each GEMM's shape (T x k rows), FP8 per-tensor")
    args = parser.parse_args()
    spec = SHAPES[args.shape]
    device = torch.device("cuda")
    g = torch.Generator().manual_seed(0)
    run = make_experts(spec, args.format, device, g).run(kernel=True)
    x = torch.randn(args.tokens, spec.hidden, generator=g).to(torch.bfloat16).to(device)
    weights, ids = route_ref(torch.randn(args.tokens, spec.experts, generator=g).to(device), spec.top_k)
    dense = []
    if args.reference:
        rows = args.tokens * spec.top_k
        one = torch.ones((), device=device)
        for n, k in ((2 * spec.inter, spec.hidden), (spec.hidden, spec.inter)):  # GEMM 1 (gate_up), GEMM 2 (down)
            a = torch.randn(rows, k, device=device).to(torch.float8_e4m3fn)
            b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn)
            dense.append(lambda a=a, b=b: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one,
                                                           out_dtype=torch.bfloat16))
    for _ in range(3):  # compile and warm
        run(x, weights, ids)
        for mm in dense:
            mm()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    run(x, weights, ids)
    for mm in dense:
        mm()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"{args.shape} {args.format} T={args.tokens}: one MoE call profiled"
          + (f", then {len(dense)} torch._scaled_mm" if dense else ""))


if __name__ == "__main__":
    main()
