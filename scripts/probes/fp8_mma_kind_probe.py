"""Which tensor-core instruction GEMM 1 compiles to for FP8 experts with swap_ab: counts wgmma and mma.sync in the
PTX of the one variant the process compiles. On the GPU, one process per variant:

PYTHONPATH=src python3 scripts/probes/fp8_mma_kind_probe.py BLOCK_N ONE_DOT   # e.g. 32 0, 16 1, 32 1

(the H100, 2026-11-27: 32 rows a dot (32 0, 16 1) -> mma.sync; 64 rows (32 1) -> wgmma, whose FP8 sums differ
from the float32 reference by ~4e-3 relative in tests/kernels/test_fused_moe_quantized.py's small case).
A probe, not a test."""

from __future__ import annotations

import sys

import torch

from quickmoe.kernels import moe_gemm
from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group
from quickmoe.kernels.moe_align import moe_align
from quickmoe.kernels.moe_configs import MoEKernelConfig
from quickmoe.kernels.routing import route_ref


def main() -> None:
    block_n, one_dot = int(sys.argv[1]), sys.argv[2] == "1"
    g = torch.Generator().manual_seed(0)
    E, H, I = 8, 256, 384
    w1 = (torch.randn(E, 2 * I, H, generator=g) * 64).clamp(-448, 448).to(torch.float8_e4m3fn).cuda()
    s1 = torch.rand(E, H // 128, 2 * I, generator=g).cuda() / 100
    x = torch.randn(9, H, generator=g).cuda()
    q, qs = quantize_fp8_per_token_group(x)
    _, ids = route_ref(torch.randn(9, E, generator=g).cuda(), 2)
    align = moe_align(ids, E, 16)
    cfg = MoEKernelConfig(block_m=16, block_n=block_n, block_k=128, swap_ab=True, gate_up_one_dot=one_dot)
    moe_gemm.moe_gemm1_swiglu(q, align, 2, w1, None, s1, 64, 7.0, 1.702, act_scales=qs, out_dtype=torch.float32,
                              config=cfg, activation="silu")
    torch.cuda.synchronize()
    for cache in moe_gemm._gemm1_swiglu_kernel.device_caches.values():
        for kernel in cache[0].values():
            ptx = kernel.asm["ptx"]
            print(f"block_n {block_n} one_dot {one_dot}: wgmma {ptx.count('wgmma.mma_async')}, mma.sync {ptx.count('mma.sync')}")


if __name__ == "__main__":
    main()
