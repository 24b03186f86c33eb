"""Does asking L2 for the next layer's QKV weight while the batch-1 MoE runs make that projection faster?

PYTHONPATH=src python3 scripts/probes/l2_prefetch_probe.py [--json PATH]

At batch 1 the MoE GEMMs are bound in the SMs (gpt-oss-20b: ~29-37% of HBM), so HBM idles while they run; the
next decoder layer's QKV projection (29.5 MB of bf16 weights, cuBLAS) then streams its weight at ~76% of HBM.
`cp.async.bulk.prefetch.L2.global` asks the L2 cache for a range of bytes with one instruction and no registers:
issued by a tiny kernel before GEMM 2 (or before GEMM 1), the weight could be in L2 when the projection reads it.
Times, in CUDA graphs over rotating input sets (8 QKV weights, random routing over the 20b's 32 MXFP4 experts,
so the experts and weights come from HBM unless prefetched), us per iteration:
  qkv cold / hot          F.linear(x, W_s) with W_s rotating / always the same (the bound from L2)
  o_proj cold / hot       dense_gemm (our decode o_proj) likewise
  moe                     fused_moe at T = 1
  moe > qkv               the MoE then the next layer's QKV (no prefetch)
  pf > moe > qkv          the prefetch kernel first, then both
  gemm1 > pf > gemm2 > qkv  the prefetch between the GEMMs (what the GEMM 2 kernel would do at its start)
  ... evict_last          the same with an L2 evict_last cache policy on the prefetch
  pf alone                the prefetch kernel's own cost in the graph
A probe, not a benchmark.
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from quickmoe.bench.attention import time_in_graph
from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
from quickmoe.kernels.dense_gemm import dense_gemm
from quickmoe.kernels.fused_moe import device_arch, fused_moe
from quickmoe.kernels.moe_align import moe_align
from quickmoe.kernels.moe_configs import moe_kernel_config
from quickmoe.kernels.moe_gemm import moe_combine, moe_gemm1_swiglu, moe_gemm2
from quickmoe.kernels.routing import route_ref

_PF = tl.constexpr("{ .reg .pred p; setp.gt.s32 p, $2, 0; "
                   "@p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }")
_PF_LAST = tl.constexpr("{ .reg .pred p; .reg .b64 pol; setp.gt.s32 p, $2, 0; "
            "createpolicy.fractional.L2::evict_last.b64 pol, 1.0; "
            "@p cp.async.bulk.prefetch.L2.global.L2::cache_hint [$1], $2, pol; mov.u32 $0, 0; }")


@triton.jit
def _prefetch_kernel(ptr, nbytes, chunk, LANES: tl.constexpr, EVICT_LAST: tl.constexpr):
    """Program p, lane j asks L2 for bytes [c, c + chunk) of ptr, c = (p * LANES + j) * chunk (clipped)."""
    lane = tl.program_id(0) * LANES + tl.arange(0, LANES)  # [LANES]
    start = lane.to(tl.int64) * chunk
    size = tl.minimum(nbytes - start, chunk).to(tl.int32)
    base = ptr.to(tl.pointer_type(tl.uint8)) + start
    if EVICT_LAST:
        tl.inline_asm_elementwise(_PF_LAST, "=r,l,r", [base.to(tl.int64), size], dtype=tl.int32, is_pure=False,
                                  pack=1)
    else:
        tl.inline_asm_elementwise(_PF, "=r,l,r", [base.to(tl.int64), size], dtype=tl.int32, is_pure=False, pack=1)


def prefetch(t: torch.Tensor, programs: int, evict_last: bool) -> None:
    lanes = 128
    nbytes = t.numel() * t.element_size()
    chunk = -(-nbytes // (programs * lanes) // 16) * 16 + 16  # bytes a lane, a multiple of 16
    _prefetch_kernel[(programs,)](t, nbytes, chunk, LANES=lanes, EVICT_LAST=evict_last, num_warps=4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json")
    ap.add_argument("--reps", type=int, default=48)
    args = ap.parse_args()
    dev = torch.device("cuda")
    g = torch.Generator().manual_seed(0)
    shape = SHAPES["gpt-oss-20b"]
    ex = make_experts(shape, "mxfp4", dev, g)
    sets = 8
    wq = [(torch.randn(5120, 2880, generator=g) * 0.02).to(torch.bfloat16).to(dev) for _ in range(sets)]
    bq = [(torch.randn(5120, generator=g) * 0.02).to(torch.bfloat16).to(dev) for _ in range(sets)]
    wo = [(torch.randn(2880, 4096, generator=g) * 0.02).to(torch.bfloat16).to(dev) for _ in range(sets)]
    xs = [torch.randn(1, 2880, generator=g).to(torch.bfloat16).to(dev) for _ in range(sets)]
    xo = [torch.randn(1, 4096, generator=g).to(torch.bfloat16).to(dev) for _ in range(sets)]
    routes = [route_ref(torch.randn(1, shape.experts, generator=g).to(dev), shape.top_k) for _ in range(sets)]
    kw = ex.kwargs
    name = torch.cuda.get_device_name(dev)
    arch = device_arch(dev)
    c1 = moe_kernel_config(ex.w1.shape[0], ex.w1.shape[1], shape.hidden, "mxfp4", name, 1, arch=arch, proj="gate_up")
    c2 = moe_kernel_config(ex.w2.shape[0], ex.w2.shape[1], shape.inter, "mxfp4", name, 1, arch=arch, proj="down")
    aligns = [moe_align(ids, shape.experts, c1.block_m) for _, ids in routes]

    def moe(i):
        w, ids = routes[i]
        return fused_moe(xs[i], w, ids, ex.w1, ex.b1, ex.w2, ex.b2, **kw)

    def split_moe(i, between):
        w, ids = routes[i]
        inter = moe_gemm1_swiglu(xs[i], aligns[i], shape.top_k, ex.w1, ex.b1, kw["w1_scales"], GROUP, 7.0, 1.702,
                                 config=c1)
        between(i)
        out = moe_gemm2(inter, aligns[i], w, ex.w2, ex.b2, kw["w2_scales"], config=c2)
        return moe_combine(out, shape.top_k)

    def qkv(i):
        return F.linear(xs[i], wq[i], bq[i])

    nothing = lambda i: None  # noqa: E731
    variants = {
        "qkv cold": qkv,
        "qkv hot": lambda i: F.linear(xs[i], wq[0], bq[0]),
        "o_proj cold": lambda i: dense_gemm(xo[i], wo[i], None),
        "o_proj hot": lambda i: dense_gemm(xo[i], wo[0], None),
        "moe": moe,
        "gemm1 > gemm2": lambda i: split_moe(i, nothing),
        "moe > qkv": lambda i: (moe(i), qkv(i)),
        "gemm1 > gemm2 > qkv": lambda i: (split_moe(i, nothing), qkv(i)),
    }
    for programs in (16, 132):
        for last in (False, True):
            tag = f"{programs} programs" + (", evict_last" if last else "")
            variants[f"pf alone ({tag})"] = lambda i, p=programs, e=last: prefetch(wq[i], p, e)
            variants[f"pf > moe > qkv ({tag})"] = lambda i, p=programs, e=last: (prefetch(wq[i], p, e), moe(i), qkv(i))
            variants[f"gemm1 > pf > gemm2 > qkv ({tag})"] = (
                lambda i, p=programs, e=last: (split_moe(i, lambda j: prefetch(wq[j], p, e)), qkv(i)))
            variants[f"pf > qkv ({tag})"] = lambda i, p=programs, e=last: (prefetch(wq[i], p, e), qkv(i))
    results = {}
    print(f"{name}; us per iteration, CUDA graph of {args.reps} iterations over {sets} input sets, median of 7")
    for label, fn in variants.items():
        for turn in range(2):
            us = time_in_graph(fn, sets, args.reps) * 1e6
            results.setdefault(label, []).append(us)
        print(f"{label:55s} {' / '.join(f'{u:7.2f}' for u in results[label])}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "us": results}, f, indent=1)


if __name__ == "__main__":
    main()
