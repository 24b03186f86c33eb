"""The decode step's glue kernels alone, in CUDA graphs (us a call): the residual add + RMSNorm at several warp
counts and row counts (gpt-oss-20b's hidden 2880), and decode attention with RoPE + KV write as one launch
(`rotary_paged_decode_attention`) against the two launches (`rotary_write_kv`, then `paged_decode_attention`),
gpt-oss-20b's heads (64 query / 8 KV, head dim 64), full and 128-token-window layers.

    python scripts/probes/glue_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json

import torch

from quickmoe.bench.attention import time_in_graph
from quickmoe.kernels import rms_norm as norm
from quickmoe.kernels.decode_attention import paged_decode_attention, rotary_paged_decode_attention
from quickmoe.kernels.rotary_kv_write import rotary_write_kv

BLOCK = 16


def _norm_rows(device: torch.device) -> list[dict]:
    rows = []
    g = torch.Generator(device="cpu").manual_seed(0)
    w = torch.rand(2880, generator=g).to(device)
    for tokens in (1, 64, 256, 8192):
        sets = [(torch.randn(tokens, 2880, generator=g).to(device, torch.bfloat16),
                 torch.randn(tokens, 2880, generator=g).to(device, torch.bfloat16)) for _ in range(4)]
        for warps in (1, 2, 4, 8, 16):
            def call(i, s=sets, n=warps):
                return norm._launch(s[i][0], s[i][1], w, 1e-5, num_warps=n)

            us = time_in_graph(call, 4, 50) * 1e6
            rows.append({"tokens": tokens, "num_warps": warps, "us": round(us, 2)})
            print(f"fused_add_rms_norm T={tokens:5d} warps={warps:2d}: {us:7.2f} us", flush=True)
    return rows


def _attention_set(batch: int, context: int, window: int, g: torch.Generator, device: torch.device) -> dict:
    heads, kv, dim = 64, 8, 64
    per_seq = -(-context // BLOCK)
    num_blocks = batch * per_seq + 4
    order = torch.randperm(num_blocks, generator=g)[:batch * per_seq].view(batch, per_seq).to(torch.int32)
    if window:
        order[:, :max(0, (context - window) // BLOCK - 1)] = -1  # released blocks
    slot = (order[:, -1].long() * BLOCK + (context - 1) % BLOCK)
    return {"qkv": torch.randn(batch, (heads + 2 * kv) * dim, generator=g).to(device, torch.bfloat16),
            "k": torch.randn(num_blocks, BLOCK, kv, dim, generator=g).to(device, torch.bfloat16),
            "v": torch.randn(num_blocks, BLOCK, kv, dim, generator=g).to(device, torch.bfloat16),
            "tables": order.to(device), "slots": slot.to(device),
            "pos": torch.full((batch,), context - 1, device=device),
            "lens": torch.full((batch,), context, dtype=torch.int32, device=device)}


def _attention_rows(device: torch.device) -> list[dict]:
    rows = []
    g = torch.Generator(device="cpu").manual_seed(1)
    cos_sin = torch.randn(4096, 64, generator=g).to(device)
    sinks = torch.randn(64, generator=g).to(device)
    for batch in (1, 64, 256):
        for window in (0, 128):
            sets = [_attention_set(batch, 1000, window, g, device) for _ in range(3)]

            def two(i, s=sets, w=window):
                d = s[i]
                q = rotary_write_kv(d["qkv"], d["pos"], cos_sin, d["k"], d["v"], d["slots"])
                return paged_decode_attention(q, d["k"], d["v"], d["tables"], d["lens"], sinks, w, 0.125)

            def one(i, s=sets, w=window):
                d = s[i]
                return rotary_paged_decode_attention(d["qkv"], d["pos"], cos_sin, d["k"], d["v"], d["slots"],
                                                     d["tables"], d["lens"], sinks, w, 0.125)

            d = sets[0]
            k0, v0 = d["k"].clone(), d["v"].clone()
            want = two(0)
            k1, v1 = d["k"].clone(), d["v"].clone()
            d["k"].copy_(k0), d["v"].copy_(v0)
            got = one(0)
            same = torch.equal(d["k"], k1) and torch.equal(d["v"], v1)
            err = (got.float() - want.float()).abs().max().item()
            t_two = time_in_graph(two, 3, 24) * 1e6
            t_one = time_in_graph(one, 3, 24) * 1e6
            rows.append({"batch": batch, "window": window, "two_launches_us": round(t_two, 2),
                         "one_launch_us": round(t_one, 2), "cache_equal": same, "max_abs_diff": err})
            print(f"decode attention B={batch:3d} window={window:3d}: RoPE+write, attention {t_two:6.2f} us; "
                  f"one launch {t_one:6.2f} us (cache equal {same}, max |diff| {err:.2e})", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    device = torch.device("cuda")
    result = {"norm": _norm_rows(device), "attention": _attention_rows(device)}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
