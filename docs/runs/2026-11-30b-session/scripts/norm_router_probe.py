"""The post-attention norm and the router at decode sizes on the GPU: `norm_router_route` (one kernel) against
`fused_add_rms_norm` then `router_route` (two), us a call in CUDA graphs of 32 calls rotating over 16 input and
router-weight sets, beside the bits of the two ways (x's last bit may differ: the sum of squares' order; the
sum must not), for gpt-oss-20b, Qwen3-30B-A3B and Mixtral-8x7B router shapes. A probe, not a benchmark: the
model's figures come from `quickmoe bench generate`.

    PYTHONPATH=src python3 scripts/probes/norm_router_probe.py [--tokens 1,8,64,256] [--json PATH]
"""

from __future__ import annotations

import argparse
import json

import torch

from quickmoe.bench.attention import time_in_graph
from quickmoe.kernels.norm_router import norm_router_route
from quickmoe.kernels.rms_norm import fused_add_rms_norm
from quickmoe.kernels.router import router_route

# name: (experts, hidden, top_k, bias, scoring, renormalize)
SHAPES = {"gpt-oss-20b": (32, 2880, 4, True, "topk_softmax", False),
          "qwen3-30b-a3b": (128, 2048, 8, False, "softmax_topk", True),
          "mixtral-8x7b": (8, 4096, 2, False, "softmax_topk", True)}
SETS = 16


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="1,8,64,256")
    parser.add_argument("--json")
    args = parser.parse_args()
    device = torch.device("cuda")
    g = torch.Generator().manual_seed(0)
    rows = []
    for name, (experts, hidden, top_k, bias, scoring, renormalize) in SHAPES.items():
        ws = [(torch.randn(experts, hidden, generator=g) / hidden ** 0.5).to(device, torch.bfloat16)
              for _ in range(SETS)]
        bs = [torch.randn(experts, generator=g).to(device, torch.bfloat16) if bias else None for _ in range(SETS)]
        nws = [(torch.rand(hidden, generator=g) + 0.5).to(device) for _ in range(SETS)]
        for tokens in (int(t) for t in args.tokens.split(",")):
            ds = [torch.randn(tokens, hidden, generator=g).to(device, torch.bfloat16) for _ in range(SETS)]
            rs = [(torch.randn(tokens, hidden, generator=g) * 4).to(device, torch.bfloat16) for _ in range(SETS)]

            def fused(i):
                return norm_router_route(ds[i], rs[i], nws[i], 1e-5, ws[i], bs[i], top_k, scoring=scoring,
                                         renormalize=renormalize)

            def apart(i):
                x, summed = fused_add_rms_norm(ds[i], rs[i], nws[i], 1e-5)
                return (x, summed, *router_route(x, ws[i], bs[i], top_k, scoring=scoring, renormalize=renormalize))

            got, want = fused(0), apart(0)
            x_diff = (got[0] != want[0]).float().mean().item()
            same_sum = torch.equal(got[1], want[1])
            same_ids = (got[3] == want[3]).all(dim=1).float().mean().item()
            times = {}
            for turn in range(2):  # in turns
                for label, fn in (("fused", fused), ("apart", apart)):
                    times.setdefault(label, []).append(time_in_graph(fn, SETS, 32) * 1e6)
            row = {"shape": name, "tokens": tokens, "fused_us": min(times["fused"]), "apart_us": min(times["apart"]),
                   "turns": times, "x_bits_differ": x_diff, "same_sum": same_sum, "same_ids": same_ids}
            rows.append(row)
            print(f"{name:14s} T={tokens:4d}: fused {row['fused_us']:6.2f} us, norm + router {row['apart_us']:6.2f} us "
                  f"(turns {['%.2f' % t for t in times['fused']]} / {['%.2f' % t for t in times['apart']]}); "
                  f"x bits differ {x_diff:.1%}, sum equal {same_sum}, same experts {same_ids:.1%}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
