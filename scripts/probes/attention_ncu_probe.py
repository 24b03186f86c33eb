"""Decode attention at one (batch, context) point, ours then SDPA, for Nsight Compute to compare the two kernels.

`bench attention` builds the inputs (`bench_decode`'s paged set: bf16, blocks in random order, the engine's default
cache layout; SDPA on the same number of keys laid out contiguously). Each kernel runs WARMUP times outside the
profiled range, then once inside it (`cudaProfilerStart/Stop`), so `ncu --profile-from-start off` sees exactly one
launch of each: ours (the split kernel, and its combine where the point takes splits), then SDPA's.

    ncu --profile-from-start off --section SpeedOfLight ... python3 scripts/probes/attention_ncu_probe.py \\
        --batch 256 --context 4096
"""

from __future__ import annotations

import argparse

import torch

from quickmoe.bench.attention import HEAD_DIM, HEADS, KV_HEADS, _paged_set, _randn
from quickmoe.kernels.decode_attention import paged_decode_attention


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--window", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    device = torch.device("cuda")
    g = torch.Generator(device).manual_seed(0)
    paged = _paged_set(args.batch, args.context, args.window, g, device, head_major=True)
    lens = torch.full((args.batch,), args.context, dtype=torch.long, device=device)
    q = _randn(args.batch, HEADS, HEAD_DIM, g=g, device=device)
    visible = min(args.context, args.window) if args.window > 0 else args.context
    k = _randn(args.batch, KV_HEADS, visible, HEAD_DIM, g=g, device=device)
    v = _randn(args.batch, KV_HEADS, visible, HEAD_DIM, g=g, device=device)
    q4 = _randn(args.batch, HEADS, 1, HEAD_DIM, g=g, device=device)
    scale = HEAD_DIM**-0.5

    def ours():
        return paged_decode_attention(q, paged["k"], paged["v"], paged["tables"], lens, paged["sinks"], args.window,
                                      scale)

    def sdpa():
        return torch.nn.functional.scaled_dot_product_attention(q4, k, v, scale=scale, enable_gqa=True)

    for fn in (ours, sdpa):
        for _ in range(args.warmup):
            fn()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        fn()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    kv_bytes = 2 * args.batch * visible * KV_HEADS * HEAD_DIM * 2
    print(f"batch {args.batch} context {args.context} window {args.window}: {kv_bytes / 1e6:.1f} MB of K and V")


if __name__ == "__main__":
    main()
