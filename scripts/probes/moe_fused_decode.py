"""GEMM 1 and GEMM 2 of a decode-sized MXFP4 MoE layer in one launch (issue 15, a probe; not in the engine).

Measured on the H200 (docs/benchmarks.md, 2026-11-30 fourteenth session): the same bits as the two launches and no
gain (gpt-oss-20b T = 1 31.4 us against 31.1 for the two launches with the same tiles; T = 2 slower, T = 4 -3%): the
two launches in one graph already cost the sum of each alone, so the ~6 us a GEMM spends beyond its bytes at T = 1 is
not the launch or the grid's ramp.

At T = 1 each of the two GEMMs spends about 6 us beyond its bytes whatever its shape or instruction count (GEMM 2 of
gpt-oss-20b: 17.7 MB, 4.2 us at the HBM's rate, 10.2-11.6 us at best; docs/benchmarks.md, 2026-11-30 fourteenth
session). One launch pays that once: its first programs run GEMM 1's tiles (the engine's `_gemm1_tile`, one part of
K), each adding one to its M tile's counter when its rows of the intermediate are stored (release); the programs
after them run GEMM 2's tiles (`_gemm2_tile`) of an M tile once its counter reaches GEMM 1's tiles of it (acquire),
so an expert's GEMM 2 starts when that expert's GEMM 1 ends, not when the whole grid's does, and no launch or ramp
lies between them. Programs are dispatched in order, so every GEMM 1 program is running or done before any GEMM 2
program waits (no deadlock). The last GEMM 2 program of an M tile sets both its counters back to zero.

The same tile functions in the same order of K steps: the outputs equal the two launches' (one part of K each) bit
for bit; `--check-only` checks that on a small shape (the CPU interpreter: TRITON_INTERPRET=1, where programs run one
after another). On the GPU it times, for gpt-oss-20b's experts on random routing (4 input sets, in a CUDA graph, us):
    pair-k2   the engine's two launches with the H200 files' entries (K in 2 parts at T = 1, as shipped)
    pair      the two launches with the fused kernel's configs (one part of K)
    fused     the one launch, after checking that its output equals `pair`'s

    PYTHONPATH=src python3 scripts/probes/moe_fused_decode.py [--tokens 1,2,4,8] [--check-only]

A probe, not a benchmark.
"""

from __future__ import annotations

import argparse
import os

import torch
import triton
import triton.language as tl

from quickmoe.kernels.moe_align import MoEAlignment
from quickmoe.kernels.moe_configs import MoEKernelConfig
from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu, moe_gemm2
from quickmoe.kernels.moe_gemm_operands import launch_args
from quickmoe.kernels.moe_gemm1_kernel import _gemm1_tile
from quickmoe.kernels.moe_gemm2_kernel import _gemm2_tile
from quickmoe.kernels.pdl import pdl_kwargs, pdl_wait
from quickmoe.kernels.tickets import ticket_counters


@triton.jit(do_not_specialize=["num_assignments", "num_m", "top_k"])
def _fused_kernel(x_ptr, w1_ptr, s1_ptr, b1_ptr, inter_ptr, w2_ptr, s2_ptr, b2_ptr, route_w_ptr, out_ptr, counter_ptr,
                  sorted_ids_ptr, block_expert_ptr, num_padded_ptr, top_k, num_assignments, num_m, stride_x, limit,
                  alpha, H: tl.constexpr, I: tl.constexpr, GROUP: tl.constexpr, BLOCK_M: tl.constexpr,
                  BN1: tl.constexpr, BN2: tl.constexpr, BLOCK_K: tl.constexpr, MXFP4: tl.constexpr,
                  NVFP4: tl.constexpr, FP8_SCALE_ROWS: tl.constexpr, A_MXFP8: tl.constexpr, PRECISION: tl.constexpr,
                  DOT_DTYPE: tl.constexpr, PTX: tl.constexpr, MXFP4_PTX: tl.constexpr, SWAP_AB: tl.constexpr,
                  W_TMA: tl.constexpr, HAS_BIAS: tl.constexpr, PDL: tl.constexpr):
    pdl_wait(PDL)
    pid = tl.program_id(0)
    NUM_N1: tl.constexpr = (I + GROUP - 1) // GROUP * (GROUP // BN1)  # GEMM 1 programs an M tile
    NUM_N2: tl.constexpr = (H + BN2 - 1) // BN2  # GEMM 2 programs an M tile
    if pid < num_m * NUM_N1:
        pid_m = pid % num_m
        pid_n = pid // num_m
        if pid_m * BLOCK_M < tl.load(num_padded_ptr):
            _gemm1_tile(x_ptr, x_ptr, w1_ptr, s1_ptr, b1_ptr, b1_ptr, inter_ptr, inter_ptr, counter_ptr,
                        sorted_ids_ptr, block_expert_ptr, pid_m, pid_n, pid_m * BLOCK_M, top_k, num_assignments,
                        stride_x, 0, limit, alpha, H, I, MXFP4, NVFP4, FP8_SCALE_ROWS, A_MXFP8, GROUP, BLOCK_M, BN1,
                        BLOCK_K, PRECISION, DOT_DTYPE, PTX, MXFP4_PTX, SWAP_AB, HAS_BIAS, False, False, False, W_TMA,
                        NUM_N1, 1, H)
            tl.debug_barrier()  # every thread's rows of the intermediate stored before the count
            tl.atomic_add(counter_ptr + pid_m, 1, sem="release", scope="gpu")
    else:
        q = pid - num_m * NUM_N1
        pid_m = q % num_m
        pid_n = q // num_m
        if pid_m * BLOCK_M < tl.load(num_padded_ptr):
            done = tl.atomic_add(counter_ptr + pid_m, 0, sem="acquire", scope="gpu")
            while done < NUM_N1:  # the M tile's GEMM 1 programs still running
                done = tl.atomic_add(counter_ptr + pid_m, 0, sem="acquire", scope="gpu")
            _gemm2_tile(inter_ptr, inter_ptr, w2_ptr, s2_ptr, b2_ptr, b2_ptr, route_w_ptr, out_ptr, out_ptr,
                        counter_ptr, sorted_ids_ptr, block_expert_ptr, pid_m, pid_n, pid_m * BLOCK_M, num_assignments,
                        I, 0, H, I, MXFP4, NVFP4, FP8_SCALE_ROWS, A_MXFP8, BLOCK_M, BN2, BLOCK_K, PRECISION,
                        DOT_DTYPE, PTX, MXFP4_PTX, SWAP_AB, HAS_BIAS, False, W_TMA, NUM_N2, 1, I)
            if tl.atomic_add(counter_ptr + num_m + pid_m, 1, sem="acq_rel", scope="gpu") == NUM_N2 - 1:
                tl.atomic_xchg(counter_ptr + pid_m, 0, sem="relaxed", scope="gpu")  # the next call's counts
                tl.atomic_xchg(counter_ptr + num_m + pid_m, 0, sem="relaxed", scope="gpu")


def fused_decode_moe(acts: torch.Tensor, align: MoEAlignment, top_k: int, w1, b1, s1, w2, b2, s2,
                     topk_weights: torch.Tensor, group: int, limit: float, alpha: float,
                     config1: MoEKernelConfig, config2: MoEKernelConfig) -> torch.Tensor:
    """Both GEMMs of gpt-oss's MXFP4 MoE layer in one launch -> [A, H] (as `moe_gemm2(moe_gemm1_swiglu(...))` with
    these configs and one part of K each). The configs must share warps and stages, and take tiles of
    align.block_m rows, transposed or not alike."""
    if (config1.num_warps, config1.num_stages, config1.swap_ab, config1.block_k) != (
            config2.num_warps, config2.num_stages, config2.swap_ab, config2.block_k):
        raise ValueError(f"fused decode MoE: one launch needs the GEMMs' warps, stages, orientation and block_k alike; "
                         f"got {config1} and {config2}")
    hidden, intermediate = acts.shape[1], w1.shape[1] // 2
    inter = torch.empty(align.num_assignments, intermediate, dtype=acts.dtype, device=acts.device)
    out = torch.empty(align.num_assignments, hidden, dtype=acts.dtype, device=acts.device)
    num_m = align.block_expert.numel()
    num_n1 = triton.cdiv(intermediate, group) * (group // config1.block_n)
    num_n2 = triton.cdiv(hidden, config2.block_n)
    counters = ticket_counters(acts.device, "moe_fused_decode")
    args = launch_args(acts, None, w1, s1, acts.dtype, config1)
    _fused_kernel[(num_m * (num_n1 + num_n2),)](
        acts, w1, s1, b1, inter, w2, s2, b2, topk_weights.reshape(-1), out, counters, align.sorted_ids,
        align.block_expert, align.num_padded, top_k, align.num_assignments, num_m, acts.stride(0), float(limit),
        float(alpha), H=hidden, I=intermediate, GROUP=group, BLOCK_M=align.block_m, BN1=config1.block_n,
        BN2=config2.block_n, BLOCK_K=config1.block_k, HAS_BIAS=b1 is not None, **args, **pdl_kwargs(acts.device))
    return out


def _experts(num_experts: int, hidden: int, inter: int, device: torch.device, g: torch.Generator):
    w1 = torch.randint(0, 256, (num_experts, 2 * inter, hidden // 2), generator=g, dtype=torch.uint8)
    s1 = torch.randint(118, 126, (num_experts, hidden // 32, 2 * inter), generator=g, dtype=torch.uint8)
    w2 = torch.randint(0, 256, (num_experts, hidden, inter // 2), generator=g, dtype=torch.uint8)
    s2 = torch.randint(118, 126, (num_experts, inter // 32, hidden), generator=g, dtype=torch.uint8)
    b1 = torch.randn(num_experts, 2 * inter, generator=g).to(torch.bfloat16)
    b2 = torch.randn(num_experts, hidden, generator=g).to(torch.bfloat16)
    return [t.to(device) for t in (w1, b1, s1, w2, b2, s2)]


def _pair(x, align, top_k, ex, route, c1, c2):
    w1, b1, s1, w2, b2, s2 = ex
    inter = moe_gemm1_swiglu(x, align, top_k, w1, b1, s1, 64, 7.0, 1.702, config=c1)
    return moe_gemm2(inter, align, route, w2, b2, s2, config=c2)


def check(device: torch.device) -> None:
    """The fused launch gives the two launches' bits, twice in a row (the counters come back to zero)."""
    from quickmoe.kernels.moe_align import moe_align_ref

    g = torch.Generator().manual_seed(1)
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    ex = _experts(6, 128, 128, device, g)
    c = MoEKernelConfig(block_m=8, block_n=64, block_k=64, num_warps=4, num_stages=2, swap_ab=True)
    for tokens in (1, 3, 5):
        x = torch.randn(tokens, 128, generator=g).to(dtype).to(device)
        route = torch.rand(tokens, 2, generator=g).to(device)
        ids = torch.rand(tokens, 6, generator=g).topk(2, dim=1).indices.to(torch.int32).to(device)
        align = moe_align_ref(ids, 6, 8)
        want = _pair(x, align, 2, ex, route, c, c)
        for _ in range(2):
            got = fused_decode_moe(x, align, 2, *ex, route, 64, 7.0, 1.702, c, c)
            assert torch.equal(got, want), (tokens, (got.float() - want.float()).abs().max().item())
    print(f"fused decode MoE: equal to the two launches at T = 1, 3, 5 ({device})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="1,2,4,8")
    parser.add_argument("--check-only", action="store_true")
    args = parser.parse_args()
    device = torch.device("cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda")
    check(device)
    if args.check_only:
        return
    from quickmoe.bench.attention import time_in_graph
    from quickmoe.bench.moe_experts import SHAPES, make_experts
    from quickmoe.kernels.fused_moe import device_arch
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_configs import moe_kernel_config

    spec = SHAPES["gpt-oss-20b"]
    g = torch.Generator().manual_seed(0)
    e = make_experts(spec, "mxfp4", device, g)
    ex = (e.w1, e.b1, e.kwargs["w1_scales"], e.w2, e.b2, e.kwargs["w2_scales"])
    name, arch = torch.cuda.get_device_name(device), device_arch(device)
    fused_cfg = MoEKernelConfig(block_m=8, block_n=64, block_k=256, num_warps=4, num_stages=3, swap_ab=True)
    for tokens in (int(t) for t in args.tokens.split(",")):
        sets = 4
        xs = [torch.randn(tokens, spec.hidden, generator=g).to(torch.bfloat16).to(device) for _ in range(sets)]
        routes = [torch.rand(tokens, spec.top_k, generator=g).to(device) for _ in range(sets)]
        ids = [torch.rand(tokens, spec.experts, generator=g).topk(spec.top_k, dim=1).indices.to(torch.int32)
               .to(device) for _ in range(sets)]
        aligns = [moe_align(i, spec.experts, 8) for i in ids]
        t1 = moe_kernel_config(spec.experts, 2 * spec.inter, spec.hidden, "mxfp4", name, tokens, arch=arch,
                               proj="gate_up")
        t2 = moe_kernel_config(spec.experts, spec.hidden, spec.inter, "mxfp4", name, tokens, arch=arch, proj="down")
        fns = {"pair-k2": lambda i: _pair(xs[i], aligns[i], spec.top_k, ex, routes[i], t1, t2),
               "pair": lambda i: _pair(xs[i], aligns[i], spec.top_k, ex, routes[i], fused_cfg, fused_cfg),
               "fused": lambda i: fused_decode_moe(xs[i], aligns[i], spec.top_k, *ex, routes[i], 64, 7.0, 1.702,
                                                   fused_cfg, fused_cfg)}
        same = torch.equal(fns["fused"](0), fns["pair"](0))
        line = [f"T {tokens:2d} ({t1.block_m}-row files' tiles, fused equal to pair: {same})"]
        for label, fn in fns.items():
            line.append(f"{label} {time_in_graph(fn, sets, 16) * 1e6:.1f}")
        print("  ".join(line), flush=True)


if __name__ == "__main__":
    main()
