"""Prefill attention's launch configs on gpt-oss shapes, beside SDPA: which tile a program should take.

For each (batch, prompt length, window) point (`bench attention`'s prefill inputs: whole causal prompts in a
head-major paged cache, blocks in random order) every config of queries a program (block_q, times the GQA group of
8 heads: the rows of its tiles), keys a step (block_n), warps, pipeline stages and grid order (longest query tiles
first or in order) is checked against the default config's output (bf16: max abs difference <= 0.05, the rounding
of a different key grouping; `bits` says whether it was equal at every point) and against the float32 reference at
the smallest point, then timed in a CUDA graph (`bench attention`'s `time_in_graph`). Prints the configs by their
geometric-mean time over the points beside the default, and SDPA (causal, contiguous keys).

    python3 scripts/probes/prefill_attention_sweep.py --json sweep.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math

import torch

from quickmoe.bench.attention import HEAD_DIM, HEADS, KV_HEADS, _paged_set, _randn, time_in_graph
from quickmoe.kernels.prefill_attention import paged_prefill_attention, paged_prefill_attention_ref, prefill_launch

POINTS = ((1, 1024, 0), (4, 2048, 0), (1, 8192, 0), (16, 512, 0), (1, 8192, 128), (4, 2048, 128))


def committed_launch(group: int) -> tuple:
    """(block_q, block_n, warps, stages, longest first, maxnreg (0: none)) of the engine's launch for full layers
    (sliding ones take one stage: `prefill_launch`)."""
    block_q, warps, stages, maxnreg = prefill_launch(group)
    return (block_q, 64, warps, stages, 1, maxnreg or 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--block-q", default="16,32")
    parser.add_argument("--block-n", default="32,64,128")
    parser.add_argument("--warps", default="4,8")
    parser.add_argument("--stages", default="1,2,3,4")
    parser.add_argument("--orders", default="1,0", help="1: longest query tiles first, 0: in order")
    parser.add_argument("--maxnreg", default="0", help="registers a thread may take (ptxas limit); 0: no limit")
    parser.add_argument("--heads", default=f"{HEADS},{KV_HEADS},{HEAD_DIM}",
                        help="query heads, KV heads, head dim (gpt-oss's; Qwen3-30B-A3B 32,4,128, Mixtral 32,8,128)")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--json")
    args = parser.parse_args()
    ints = lambda text: [int(x) for x in text.split(",")]  # noqa: E731
    heads, kv_heads, head_dim = ints(args.heads)
    default = committed_launch(heads // kv_heads)
    configs = [default] + [c for c in itertools.product(ints(args.block_q), ints(args.block_n), ints(args.warps),
                                                         ints(args.stages), ints(args.orders), ints(args.maxnreg))
                          if c != default]
    device = torch.device("cuda")
    scale = head_dim**-0.5
    results = {c: {} for c in configs}
    same_bits = {c: True for c in configs}
    sdpa_us = {}
    with torch.inference_mode():
        for batch, length, window in POINTS:
            g = torch.Generator(device).manual_seed(batch * 7 + length + window)
            paged = _paged_set(batch, length, 0, g, device, head_major=True, heads=heads, kv_heads=kv_heads,
                               head_dim=head_dim)
            q = _randn(batch * length, heads, head_dim, g=g, device=device)
            cu = torch.arange(0, (batch + 1) * length, length, dtype=torch.int32, device=device)
            lens = torch.full((batch,), length, dtype=torch.long, device=device)

            def run(c, q=q, paged=paged, cu=cu, lens=lens, window=window, length=length):
                return paged_prefill_attention(q, paged["k"], paged["v"], paged["tables"], cu, lens, paged["sinks"],
                                               window, scale, block_q=c[0], block_n=c[1],
                                               num_warps=c[2], num_stages=c[3], longest_first=bool(c[4]),
                                               maxnreg=c[5] or None)

            reference = run(default).float()
            if (batch, length, window) == POINTS[0]:
                exact = paged_prefill_attention_ref(q, paged["k"], paged["v"], paged["tables"], cu, lens,
                                                    paged["sinks"], window, scale).float()
                print(f"default vs float32 reference at {POINTS[0]}: max abs {(reference - exact).abs().max():.4f}")
            for c in configs:
                try:
                    out = run(c)
                except Exception as exc:  # noqa: BLE001 (a config the compiler or the SM cannot take)
                    results[c][(batch, length, window)] = None
                    print(f"{c} at {(batch, length, window)}: {type(exc).__name__}: {str(exc)[:120]}")
                    continue
                diff = (out.float() - reference).abs().max().item()
                same_bits[c] &= diff == 0
                if diff > 0.05:
                    raise SystemExit(f"config {c} at {(batch, length, window)}: max abs {diff} from the default")
                results[c][(batch, length, window)] = time_in_graph(lambda i, c=c: run(c), 1, args.reps) * 1e6
            if window == 0:
                q4 = _randn(batch, heads, length, head_dim, g=g, device=device)
                k4 = _randn(batch, kv_heads, length, head_dim, g=g, device=device)
                v4 = _randn(batch, kv_heads, length, head_dim, g=g, device=device)
                sdpa_us[(batch, length, window)] = time_in_graph(
                    lambda i: torch.nn.functional.scaled_dot_product_attention(q4, k4, v4, scale=scale, is_causal=True,
                                                                               enable_gqa=True), 1, args.reps) * 1e6
            del paged, q
            torch.cuda.empty_cache()
    ok = {c: r for c, r in results.items() if all(v is not None for v in r.values())}
    geo = {c: math.exp(sum(math.log(v) for v in r.values()) / len(r)) for c, r in ok.items()}
    ranked = sorted(ok, key=geo.get)
    header = " ".join(f"{b}x{n}w{w}" for b, n, w in POINTS)
    print(f"| config (block_q, block_n, warps, stages, longest first, maxnreg) | bits | geomean vs default "
          f"| {header} (us) |")
    for c in ranked[:16] + ([default] if default not in ranked[:16] else []):
        print(f"| {c} | {'same' if same_bits[c] else 'differ'} | {geo[c] / geo[default]:.3f} | "
              + " ".join(f"{ok[c][p]:.1f}" for p in POINTS) + " |")
    print("| SDPA | | | " + " ".join(f"{sdpa_us.get(p, float('nan')):.1f}" for p in POINTS) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"points": POINTS, "sdpa_us": {str(k): v for k, v in sdpa_us.items()},
                       "configs": [{"config": c, "same_bits": same_bits[c], "us": {str(p): v for p, v in r.items()}}
                                   for c, r in results.items()]},
                      f, indent=1)


if __name__ == "__main__":
    main()
