"""One launch each of the decode-sized MoE GEMMs, the files' tiles and the mma.sync kernels (`moe_sync_gemm.py`,
beside this probe), on gpt-oss-20b's experts at T tokens, between cudaProfilerStart and Stop, for Nsight Compute
(`ncu --profile-from-start off`): where their cycles go (issue 15). Warmed (compiled) first; nothing timed.

    PYTHONPATH=src ncu --profile-from-start off ... python3 scripts/probes/moe_sync_ncu_probe.py [--tokens 1]
        [--variants 2.1.4.2.1,4.1.2.2.2]

A probe, not a benchmark.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the kernels of moe_sync_gemm.py


def main() -> None:
    from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
    from quickmoe.kernels.fused_moe import device_arch
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_configs import moe_kernel_config
    from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu, moe_gemm2
    from moe_sync_gemm import moe_gemm1_swiglu_sync, moe_gemm2_sync  # beside this probe

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="gpt-oss-20b")
    parser.add_argument("--tokens", type=int, default=1)
    parser.add_argument("--variants", default="2.1.4.2.1,4.1.2.2.2")
    args = parser.parse_args()
    spec = SHAPES[args.shape]
    device = torch.device("cuda")
    name, arch = torch.cuda.get_device_name(device), device_arch(device)
    g = torch.Generator().manual_seed(0)
    ex = make_experts(spec, "mxfp4", device, g)
    w1, b1, s1, w2, b2, s2 = ex.w1, ex.b1, ex.kwargs["w1_scales"], ex.w2, ex.b2, ex.kwargs["w2_scales"]
    x = torch.randn(args.tokens, spec.hidden, generator=g).to(torch.bfloat16).cuda()
    inter = torch.randn(args.tokens * spec.top_k, spec.inter, generator=g).to(torch.bfloat16).cuda()
    routes = torch.rand(args.tokens, spec.top_k, generator=g).cuda()
    ids = torch.rand(args.tokens, spec.experts, generator=g).topk(spec.top_k, dim=1).indices.to(torch.int32).cuda()
    c1 = moe_kernel_config(spec.experts, 2 * spec.inter, spec.hidden, "mxfp4", name, args.tokens, arch=arch,
                           proj="gate_up")
    c2 = moe_kernel_config(spec.experts, spec.hidden, spec.inter, "mxfp4", name, args.tokens, arch=arch, proj="down")
    align_t, align8 = moe_align(ids, spec.experts, c1.block_m), moe_align(ids, spec.experts, 8)
    launches = [lambda: moe_gemm1_swiglu(x, align_t, spec.top_k, w1, b1, s1, GROUP, 7.0, 1.702, config=c1),
                lambda: moe_gemm2(inter, align_t, routes, w2, b2, s2, config=c2)]
    for v in args.variants.split(","):
        nw, mt, kb, depth, split = (int(a) for a in v.split("."))
        kw = dict(warps=nw, m_tiles=mt, k_chunks=kb, depth=depth, split=split)
        launches += [lambda kw=kw: moe_gemm1_swiglu_sync(x, align8, spec.top_k, w1, b1, s1, GROUP, 7.0, 1.702, **kw),
                     lambda kw=kw: moe_gemm2_sync(inter, align8, routes, w2, b2, s2, **kw)]
    for fn in launches:
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for fn in launches:
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
