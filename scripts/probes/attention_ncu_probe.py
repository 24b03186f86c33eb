"""Decode attention at one (batch, context) point, ours then SDPA, for Nsight Compute to compare the two kernels.

`bench attention` builds the inputs (`bench_decode`'s paged set: bf16, blocks in random order, the engine's default
cache layout; SDPA on the same number of keys laid out contiguously). Each kernel runs WARMUP times outside the
profiled range, then once inside it (`cudaProfilerStart/Stop`), so `ncu --profile-from-start off` sees exactly one
launch of each: ours (the split kernel, and its combine where the point takes splits), then SDPA's.

    ncu --profile-from-start off --section SpeedOfLight ... python3 scripts/probes/attention_ncu_probe.py \\
        --batch 256 --context 4096

`--prefill`: prefill attention instead (`bench attention`'s prefill inputs: `--batch` whole causal prompts of
`--context` tokens in a head-major paged cache; SDPA causal on the same lengths laid out contiguously).
"""

from __future__ import annotations

import argparse

import torch

from quickmoe.bench.attention import HEAD_DIM, HEADS, KV_HEADS, _paged_set, _randn
from quickmoe.kernels.decode_attention import paged_decode_attention
from quickmoe.kernels.prefill_attention import paged_prefill_attention


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--window", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--prefill", action="store_true", help="prefill attention (see above)")
    args = parser.parse_args()
    device = torch.device("cuda")
    g = torch.Generator(device).manual_seed(0)
    if args.prefill:
        profile_once(*prefill_pair(args, g, device), args.warmup)
        print(f"prefill: batch {args.batch} x {args.context} tokens, window {args.window}")
        return
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

    profile_once(ours, sdpa, args.warmup)
    kv_bytes = 2 * args.batch * visible * KV_HEADS * HEAD_DIM * 2
    print(f"batch {args.batch} context {args.context} window {args.window}: {kv_bytes / 1e6:.1f} MB of K and V")


def prefill_pair(args: argparse.Namespace, g: torch.Generator, device: torch.device) -> tuple:
    """(ours, SDPA) on one prefill point: whole prompts, ours from the paged cache, SDPA on contiguous keys."""
    batch, length = args.batch, args.context
    paged = _paged_set(batch, length, 0, g, device, head_major=True)
    q = _randn(batch * length, HEADS, HEAD_DIM, g=g, device=device)
    cu = torch.arange(0, (batch + 1) * length, length, dtype=torch.int32, device=device)
    lens = torch.full((batch,), length, dtype=torch.long, device=device)
    q4 = _randn(batch, HEADS, length, HEAD_DIM, g=g, device=device)
    k = _randn(batch, KV_HEADS, length, HEAD_DIM, g=g, device=device)
    v = _randn(batch, KV_HEADS, length, HEAD_DIM, g=g, device=device)
    scale = HEAD_DIM**-0.5

    def ours():
        return paged_prefill_attention(q, paged["k"], paged["v"], paged["tables"], cu, lens, paged["sinks"],
                                       args.window, scale)

    def sdpa():
        return torch.nn.functional.scaled_dot_product_attention(q4, k, v, scale=scale, is_causal=True,
                                                                enable_gqa=True)

    return ours, sdpa


def profile_once(ours, sdpa, warmup: int) -> None:
    """Each function `warmup` times outside the profiled range, then once inside it."""
    for fn in (ours, sdpa):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        fn()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
