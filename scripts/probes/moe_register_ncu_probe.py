"""One launch each of the register-operand MoE GEMMs (`kernels/moe_gemm_register.py`) on gpt-oss-20b's experts at a
decode batch, between cudaProfilerStart and Stop, for Nsight Compute (`ncu --profile-from-start off`): where a
program's cycles go (issue 15). The launches are warmed (compiled) first; nothing is timed here.

    PYTHONPATH=src ncu --profile-from-start off --kernel-name regex:register ... \\
        python3 scripts/probes/moe_register_ncu_probe.py [--tokens 256] [--block-m 64] [--shape gpt-oss-20b]

A probe, not a benchmark.
"""

from __future__ import annotations

import argparse

import torch


def main() -> None:
    from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_gemm_register import moe_gemm1_swiglu_register, moe_gemm2_register

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="gpt-oss-20b")
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--block-m", type=int, default=64)
    args = parser.parse_args()
    spec = SHAPES[args.shape]
    g = torch.Generator().manual_seed(0)
    ex = make_experts(spec, "mxfp4", torch.device("cuda"), g)
    x = torch.randn(args.tokens, spec.hidden, generator=g).to(torch.bfloat16).cuda()
    inter = torch.randn(args.tokens * spec.top_k, spec.inter, generator=g).to(torch.bfloat16).cuda()
    routes = torch.rand(args.tokens, spec.top_k, generator=g).cuda()
    ids = torch.rand(args.tokens, spec.experts, generator=g).topk(spec.top_k, dim=1).indices.to(torch.int32).cuda()
    align = moe_align(ids, spec.experts, args.block_m)

    def both():
        moe_gemm1_swiglu_register(x, align, spec.top_k, ex.w1, ex.b1, ex.kwargs["w1_scales"], GROUP, 7.0, 1.702)
        moe_gemm2_register(inter, align, routes, ex.w2, ex.b2, ex.kwargs["w2_scales"])

    both()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    both()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
