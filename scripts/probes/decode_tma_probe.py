"""Decode attention with each cache block's K and V tile loaded by TMA (a host tensor descriptor), against the engine's
gathered pointer loads, on gpt-oss shapes (64 query / 8 KV heads, head dim 64, sinks, full layers).

Why: at 32 sequences of 1k-16k keys SDPA on contiguous keys leads the engine's kernel by 4-14% (H200, 2026-12-01),
and by 2-3% at 64-256 sequences, whatever the split count, warps and stages (2026-11-30 sweeps). Triton gives the
gathered pointer loads one or two shared buffers whatever num_stages says (read in the ttgir), so a program keeps
at most two 16 KB tiles in flight; TMA loads of a descriptor get a ring of num_stages buffers and no address
arithmetic a key. A TMA box is one contiguous region: with the head-major cache and 64-position blocks, one
block's rows of one KV head are one [64, 64] box (8 KB), so the probe takes 64-key tiles = one block.

Variants at each (batch, context) point, each output checked against the engine kernel on the same cache:
  ptr16: the engine's kernel and rule (16-position blocks, the bench's random block order);
  ptr64: the engine's kernel on 64-position blocks;
  tma.W.S.P: this probe's kernel, W warps, S stages, P splits (64-position blocks).
Prints a table of us (CUDA graph, `bench attention`'s timing) beside SDPA on contiguous keys.

    python3 scripts/probes/decode_tma_probe.py [--batches 1,8,32,64,256] [--contexts 1024,4096,16384]
        [--warps 2,4] [--stages 2,3,4,6] [--splits 1,2] [--json PATH]
"""

from __future__ import annotations

import argparse
import itertools
import json

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from quickmoe.bench.attention import _paged_set, time_in_graph
from quickmoe.kernels.decode_attention import paged_decode_attention
from quickmoe.kernels.decode_launch import decode_num_splits

HEADS, KV, DIM, BLOCK = 64, 8, 64, 64
GROUP = HEADS // KV
LOG2E = 1.4426950408889634


@triton.jit
def _decode_tma_kernel(q_ptr, k_desc, v_desc, block_tables_ptr, context_lens_ptr, sinks_ptr, out_ptr, part_ptr,
                       stride_qb, stride_bt, qk_scale, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr,
                       D: tl.constexpr, BLOCK: tl.constexpr, KV: tl.constexpr, SPLITS: tl.constexpr):
    kv_head = tl.program_id(0)
    seq = tl.program_id(1)
    split = tl.program_id(2)
    rows = tl.arange(0, GROUP_PAD)
    row_ok = rows < GROUP
    heads = kv_head * GROUP + rows
    dims = tl.arange(0, D)
    ctx = tl.load(context_lens_ptr + seq)
    n_tiles = tl.cdiv(ctx, BLOCK)
    per_split = tl.cdiv(n_tiles, SPLITS)
    t_lo = split * per_split
    t_hi = tl.minimum(t_lo + per_split, n_tiles)
    q = tl.load(q_ptr + seq * stride_qb + heads[:, None] * D + dims[None, :], mask=row_ok[:, None], other=0.0)
    m = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_sum = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, D], tl.float32)
    keys = tl.arange(0, BLOCK)
    for t in range(t_lo, t_hi):
        block = tl.load(block_tables_ptr + seq * stride_bt + t)
        row = (block * KV + kv_head) * BLOCK  # the block's rows of this KV head in the [blocks * KV * BLOCK, D] view
        k = k_desc.load([row, 0])  # [BLOCK, D]
        v = v_desc.load([row, 0])
        key_ok = t * BLOCK + keys < ctx
        v = tl.where(key_ok[:, None], v, 0.0)  # a block's unwritten rows may hold anything (0 x NaN is NaN)
        s = tl.dot(q, tl.trans(k))
        s = tl.where(key_ok[None, :], s * qk_scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m - m_new)
        l_sum = l_sum * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    if SPLITS == 1:
        sink = tl.load(sinks_ptr + heads, mask=row_ok, other=0.0).to(tl.float32) * 1.4426950408889634
        m_all = tl.maximum(m, sink)
        scale_acc = tl.exp2(m - m_all)
        denom = l_sum * scale_acc + tl.exp2(sink - m_all)
        out = acc * (scale_acc / denom)[:, None]
        offsets = seq * (KV * GROUP * D) + heads[:, None] * D + dims[None, :]
        tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])
    else:  # partials [B, H, SPLITS, D + 2]: acc, then m and l
        base = ((seq * (KV * GROUP) + heads) * SPLITS + split) * (D + 2)
        tl.store(part_ptr + base[:, None] + dims[None, :], acc, mask=row_ok[:, None])
        tl.store(part_ptr + base + D, m, mask=row_ok)
        tl.store(part_ptr + base + D + 1, l_sum, mask=row_ok)


@triton.jit
def _combine_kernel(part_ptr, sinks_ptr, out_ptr, D: tl.constexpr, SPLITS: tl.constexpr):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    heads = tl.num_programs(1)
    splits = tl.arange(0, SPLITS)
    dims = tl.arange(0, D)
    base = ((seq * heads + head) * SPLITS + splits) * (D + 2)  # [S]
    m = tl.load(part_ptr + base + D)
    l_sum = tl.load(part_ptr + base + D + 1)
    acc = tl.load(part_ptr + base[:, None] + dims[None, :])
    sink = tl.load(sinks_ptr + head).to(tl.float32) * 1.4426950408889634
    m_all = tl.maximum(tl.max(m, axis=0), sink)
    w = tl.exp2(m - m_all)
    denom = tl.sum(l_sum * w, axis=0) + tl.exp2(sink - m_all)
    result = tl.sum(acc * w[:, None], axis=0) / denom
    tl.store(out_ptr + (seq * heads + head) * D + dims, result.to(out_ptr.dtype.element_ty))


def tma_decode(q, k_desc, v_desc, tables, lens, sinks, scale, warps, stages, splits, out=None, part=None):
    batch = q.shape[0]
    out = out if out is not None else torch.empty_like(q)
    if splits > 1 and part is None:
        part = torch.empty(batch, HEADS, splits, DIM + 2, dtype=torch.float32, device=q.device)
    _decode_tma_kernel[(KV, batch, splits)](q, k_desc, v_desc, tables, lens, sinks, out, part if splits > 1 else out,
                                            q.stride(0), tables.stride(0), scale * LOG2E, GROUP=GROUP, GROUP_PAD=16,
                                            D=DIM, BLOCK=BLOCK, KV=KV, SPLITS=splits, num_warps=warps,
                                            num_stages=stages)
    if splits > 1:
        _combine_kernel[(batch, HEADS)](part, sinks, out, D=DIM, SPLITS=splits, num_warps=1)
    return out


def _descriptors(k: torch.Tensor, v: torch.Tensor):
    """k, v: [blocks, BLOCK, KV, D] head-major views -> descriptors of their [blocks * KV * BLOCK, D] storage."""
    def desc(t):
        flat = t.permute(0, 2, 1, 3).reshape(-1, DIM)  # the contiguous storage, no copy
        assert flat.data_ptr() == t.data_ptr()
        return TensorDescriptor(flat, shape=list(flat.shape), strides=[DIM, 1], block_shape=[BLOCK, DIM])
    return desc(k), desc(v)


def main() -> None:
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=ints, default=[1, 8, 32, 64, 256])
    ap.add_argument("--contexts", type=ints, default=[1024, 4096, 16384])
    ap.add_argument("--warps", type=ints, default=[2, 4])
    ap.add_argument("--stages", type=ints, default=[2, 3, 4, 6])
    ap.add_argument("--splits", type=ints, default=None, help="default: 1 and the engine's rule")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()
    device = torch.device("cuda")
    scale = DIM**-0.5
    rows = []
    for batch, context in itertools.product(args.batches, args.contexts):
        if batch * context > 64 * 16384:  # 256 x 16k: 8.6 GB a set, left out as in decode_attention_sweep.py
            continue
        g = torch.Generator(device).manual_seed(batch + context)
        torch.manual_seed(batch * 3 + context)
        sets16 = [_paged_set(batch, context, 0, g, device, head_major=True, block=16) for _ in range(2)]
        sets64 = [_paged_set(batch, context, 0, g, device, head_major=True, block=BLOCK) for _ in range(2)]
        qs = [torch.randn(batch, HEADS, DIM, generator=g, device=device, dtype=torch.bfloat16) for _ in range(2)]
        lens = torch.full((batch,), context, dtype=torch.long, device=device)
        descs = [_descriptors(s["k"], s["v"]) for s in sets64]
        row = {"batch": batch, "context": context, "us": {}, "err": {}}
        ref = paged_decode_attention(qs[0], sets64[0]["k"], sets64[0]["v"], sets64[0]["tables"], lens,
                                     sets64[0]["sinks"], 0, scale).float()
        row["us"]["ptr16"] = time_in_graph(lambda i: paged_decode_attention(
            qs[i], sets16[i]["k"], sets16[i]["v"], sets16[i]["tables"], lens, sets16[i]["sinks"], 0, scale), 2,
            args.reps) * 1e6
        row["us"]["ptr64"] = time_in_graph(lambda i: paged_decode_attention(
            qs[i], sets64[i]["k"], sets64[i]["v"], sets64[i]["tables"], lens, sets64[i]["sinks"], 0, scale), 2,
            args.reps) * 1e6
        rule = decode_num_splits(batch, KV, device)
        for warps, stages, splits in itertools.product(args.warps, args.stages, args.splits or sorted({1, rule})):
            name = f"tma.{warps}.{stages}.{splits}"
            try:
                out = tma_decode(qs[0], *descs[0], sets64[0]["tables"], lens, sets64[0]["sinks"], scale, warps,
                                 stages, splits)
            except Exception as exc:  # noqa: BLE001 (a config the compiler cannot take)
                print(f"{batch} x {context} {name}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
                continue
            row["err"][name] = (out.float() - ref).abs().max().item()
            row["us"][name] = time_in_graph(lambda i, w=warps, s=stages, p=splits: tma_decode(
                qs[i], *descs[i], sets64[i]["tables"], lens, sets64[i]["sinks"], scale, w, s, p), 2, args.reps) * 1e6
        k4 = [torch.randn(batch, KV, context, DIM, generator=g, device=device, dtype=torch.bfloat16) for _ in range(2)]
        v4 = [torch.randn(batch, KV, context, DIM, generator=g, device=device, dtype=torch.bfloat16) for _ in range(2)]
        q4 = [q.view(batch, HEADS, 1, DIM) for q in qs]
        row["us"]["sdpa"] = time_in_graph(lambda i: torch.nn.functional.scaled_dot_product_attention(
            q4[i], k4[i], v4[i], scale=scale, enable_gqa=True), 2, args.reps) * 1e6
        best = min((n for n in row["us"] if n.startswith("tma")), key=row["us"].get, default=None)
        print(f"{batch:4d} x {context:6d}: ptr16 {row['us']['ptr16']:8.1f}  ptr64 {row['us']['ptr64']:8.1f}  "
              f"best {best} {row['us'].get(best, float('nan')):8.1f} (err {row['err'].get(best, float('nan')):.2e})  "
              f"sdpa {row['us']['sdpa']:8.1f}   all: "
              + " ".join(f"{n}={u:.1f}" for n, u in row["us"].items() if n.startswith("tma")), flush=True)
        if max(row["err"].values(), default=0.0) > 0.02:
            print(f"  error above 0.02: {row['err']}", flush=True)
        rows.append(row)
        for kept in (sets16, sets64, descs, k4, v4):
            kept.clear()
        torch.cuda.empty_cache()
    print("| batch x keys | ptr16 (engine) | ptr64 | best TMA (warps.stages.splits) | SDPA | SDPA / best TMA |")
    for row in rows:
        tma = {n: u for n, u in row["us"].items() if n.startswith("tma")}
        best = min(tma, key=tma.get) if tma else None
        print(f"| {row['batch']} x {row['context']} | {row['us']['ptr16']:.1f} | {row['us']['ptr64']:.1f} | "
              f"{tma.get(best, float('nan')):.1f} ({best}) | {row['us']['sdpa']:.1f} | "
              f"{row['us']['sdpa'] / tma[best] if best else float('nan'):.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
