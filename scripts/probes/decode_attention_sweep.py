"""Decode attention's launch space on gpt-oss shapes (64 query / 8 KV heads, head dim 64, sinks), in CUDA graphs as
`bench attention` times it: for each (batch, context, window) point, every DecodeLaunchConfig of the grid (keys per
iteration x warps x pipeline stages x KV heads on the fastest grid axis) at the default number of splits, then the
best of them with other split counts, beside SDPA on contiguous keys and an empty PDL kernel (the launch floor of a
kernel in the graph). The cache is head-major, as the engine allocates it by default (2026-11-27: with the committed
64-key tiles 2.7-4.1% faster than slot-major at batch 256; the first run of 2026-11-24 had compared the layouts at
its best 32-key tile, where they read alike; docs/benchmarks.md).

    python scripts/probes/decode_attention_sweep.py [--json PATH] [--workers 12] [--quick] [--rotary]
        [--batches 1,2,4 --contexts 1024,4096 --windows 0,128] [--configs n64w4s3k,n128w4s2k] [--splits 1,8,32]
        [--no-extras]

(--configs: keys per iteration, warps, stages, and a trailing k for KV heads on the fastest axis; --splits: every
config at each of these split counts too; --no-extras skips the split counts of the best config.)

Compiles first in worker processes (each config x split count on small inputs of the same specialization), so
the timing loop finds every variant in Triton's cache.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import re
import statistics

import torch
import triton
import triton.language as tl

from quickmoe.bench.attention import _paged_set, time_in_graph
from quickmoe.bench.moe import measure_ceilings
from quickmoe.kernels.decode_attention import paged_decode_attention, rotary_paged_decode_attention
from quickmoe.kernels.decode_launch import DecodeLaunchConfig, decode_launch_config, decode_num_splits
from quickmoe.kernels.pdl import pdl_kwargs, pdl_wait

HEADS, KV, DIM = 64, 8, 64  # gpt-oss; --heads sets them (and the compile workers get them with their jobs)
ROTATE_BYTES = 256 << 20
POINTS = [(b, c, 0) for c in (1024, 4096, 16384) for b in (1, 8, 64, 256) if b * c <= 64 * 16384] + \
         [(b, 4096, 128) for b in (1, 8, 64, 256)]
CONFIGS = [DecodeLaunchConfig(n, w, s, f) for n, w, s, f in
           itertools.product((32, 64, 128), (2, 4, 8), (1, 2, 3, 4), (False, True))]


def _parse_config(text: str) -> DecodeLaunchConfig:
    """n{keys}w{warps}s{stages}[k]: k = KV heads on the fastest grid axis."""
    m = re.fullmatch(r"n(\d+)w(\d+)s(\d+)(k?)", text)
    if m is None:
        raise argparse.ArgumentTypeError(f"config {text!r}: expected n64w4s2[k]")
    return DecodeLaunchConfig(int(m[1]), int(m[2]), int(m[3]), m[4] == "k")


def _name(c: DecodeLaunchConfig) -> str:
    return f"n{c.block_n}w{c.num_warps}s{c.num_stages}{'k' if c.kv_fastest else ''}"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _set_shape(shape: tuple[int, int, int]) -> None:
    global HEADS, KV, DIM
    HEADS, KV, DIM = shape


ROTARY = False  # --rotary: time the decode step's kernel (RoPE and the new token's KV write fused in)


def _set(batch: int, context: int, window: int, g: torch.Generator) -> dict:
    """`bench attention`'s input set (a bf16 head-major cache of 16-position blocks in random order) with its q and
    lengths; for --rotary also the fused projection's output qkv, the positions, a cos/sin table and each new
    token's slot (the block table's entry of position context - 1)."""
    device = torch.device("cuda")
    paged = _paged_set(batch, context, window, g, device, head_major=True, heads=HEADS, kv_heads=KV, head_dim=DIM)
    lens = torch.full((batch,), context, dtype=torch.long, device=device)
    extra = {}
    if ROTARY:
        block = paged["k"].shape[1]
        last = context - 1
        extra = {"qkv": torch.randn(batch, (HEADS + 2 * KV) * DIM, generator=g, device=device, dtype=torch.bfloat16),
                 "positions": lens - 1,
                 "cos_sin": torch.rand(context, DIM, generator=g, device=device) * 2 - 1,  # [P, D] float32
                 "slots": paged["tables"][:, last // block].long() * block + last % block}
    return {**paged, **extra, "q": torch.randn(batch, HEADS, DIM, generator=g, device=device, dtype=torch.bfloat16),
            "lens": lens}


def _time(sets: list[dict], window: int, splits: int | None, config: DecodeLaunchConfig | None, reps: int) -> float:
    def call(i: int) -> torch.Tensor:
        s = sets[i]
        if ROTARY:
            return rotary_paged_decode_attention(s["qkv"], s["positions"], s["cos_sin"], s["k"], s["v"], s["slots"],
                                                 s["tables"], s["lens"], s["sinks"], window, DIM**-0.5,
                                                 num_splits=splits, config=config)
        return paged_decode_attention(s["q"], s["k"], s["v"], s["tables"], s["lens"], s["sinks"], window, DIM**-0.5,
                                      num_splits=splits, config=config)
    return time_in_graph(call, len(sets), reps)


def _compile(work: tuple[tuple[int, int, int], bool, list[tuple[int, int, DecodeLaunchConfig]]]) -> int:
    """Runs each (batch, splits, config) once on a small cache of the same specialization (fills Triton's cache)."""
    global ROTARY
    shape, ROTARY, jobs = work
    _set_shape(shape)
    g = torch.Generator("cuda").manual_seed(0)
    for batch, splits, config in jobs:
        sets = [_set(batch, 256, 0, g)]
        _time(sets, 0, splits, config, 1)
    torch.cuda.synchronize()
    return len(jobs)


def _split_counts(batch: int) -> list[int]:
    auto = decode_num_splits(batch, KV, torch.device("cuda"), head_dim=DIM)
    return sorted({1, max(1, auto // 2), auto, min(64, auto * 2)})


@triton.jit
def _noop(x_ptr, PDL: tl.constexpr):
    pdl_wait(PDL)
    if tl.program_id(0) < 0:
        tl.store(x_ptr, 0)


def _empty_kernel_us(reps: int) -> float:
    x = torch.zeros(1, device="cuda")
    return time_in_graph(lambda i: _noop[(8,)](x, **pdl_kwargs(x.device)), 1, reps) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="4 configs at 3 points (a smoke run)")
    ap.add_argument("--batches", type=_ints, default=None)
    ap.add_argument("--contexts", type=_ints, default=[1024, 4096])
    ap.add_argument("--windows", type=_ints, default=[0, 128])
    ap.add_argument("--configs", type=lambda t: [_parse_config(x) for x in t.split(",")], default=None)
    ap.add_argument("--no-extras", action="store_true")
    ap.add_argument("--heads", type=_ints, default=[HEADS, KV, DIM],
                    help="query heads, KV heads, head dim (gpt-oss 64,8,64; Qwen3-30B-A3B 32,4,128; Mixtral 32,8,128)")
    ap.add_argument("--rotary", action="store_true",
                    help="time rotary_paged_decode_attention (the decode step's kernel: RoPE and the KV write fused)")
    ap.add_argument("--splits", type=_ints, default=None,
                    help="time every config at each of these split counts (at most 8,192 programs) too")
    args = ap.parse_args()
    _set_shape(tuple(args.heads))
    global ROTARY
    ROTARY = args.rotary
    configs = args.configs or (CONFIGS[:4] if args.quick else CONFIGS)
    points = POINTS[:2] + POINTS[-1:] if args.quick else POINTS
    if args.batches:
        points = [(b, c, w) for w in args.windows for c in (args.contexts if w == 0 else args.contexts[:1])
                  for b in args.batches if w or b * c <= 64 * 16384]
    splits = {s: b for b in sorted({p[0] for p in points}) for s in _split_counts(b)}  # SPLITS is a constexpr
    splits.update({s: 1 for s in args.splits or ()})
    jobs = [(b, s, c) for s, b in splits.items() for c in configs]
    chunks = [((HEADS, KV, DIM), args.rotary, jobs[i::args.workers]) for i in range(args.workers)]
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        print(f"compiled {sum(pool.map(_compile, chunks))} variants in {args.workers} processes", flush=True)

    ceilings = measure_ceilings(torch.device("cuda"))
    hbm = ceilings["hbm_gb_per_s"]
    floor = _empty_kernel_us(args.reps)
    print(f"HBM {hbm:.0f} GB/s (copy); an empty PDL kernel in the graph: {floor:.2f} us", flush=True)
    g = torch.Generator("cuda").manual_seed(1)
    results = []
    for batch, context, window in points:
        visible = min(context, window) if window else context
        kv_bytes = 2 * batch * visible * KV * DIM * 2
        nsets = max(2, min(16, -(-ROTATE_BYTES // kv_bytes)))
        row = {"batch": batch, "context": context, "window": window, "kv_bytes": kv_bytes}
        sets = [_set(batch, context, window, g) for _ in range(nsets)]
        default = decode_launch_config(batch, KV, DIM, window, torch.cuda.get_device_name())
        row["default_us"] = _time(sets, window, None, default, args.reps) * 1e6
        timed = []
        for c in configs:
            timed.append((_time(sets, window, None, c, args.reps) * 1e6, c))
        timed.sort(key=lambda t: t[0])
        best_us, best = timed[0]
        row["configs"] = [{"us": round(us, 2), **c.__dict__} for us, c in timed]
        row["grid"] = [{"config": _name(c), "splits": sp, "us": round(_time(sets, window, sp, c, args.reps) * 1e6, 2)}
                       for c in configs for sp in args.splits or () if batch * KV * sp <= 8192]
        if row["grid"]:
            top = sorted(row["grid"], key=lambda r: r["us"])[:6]
            print(f"B={batch} ctx={context} win={window}: default {row['default_us']:.2f}; "
                  + ", ".join(f"{r['config']}@{r['splits']} {r['us']}" for r in top), flush=True)
        row["best"] = {"us": round(best_us, 2), **best.__dict__}
        row["splits"] = {} if args.no_extras else {
            s: round(_time(sets, window, s, best, args.reps) * 1e6, 2) for s in _split_counts(batch)}
        sets.clear()
        contiguous = [(torch.randn(batch, HEADS, 1, DIM, generator=g, device="cuda", dtype=torch.bfloat16),
                       torch.randn(batch, KV, visible, DIM, generator=g, device="cuda", dtype=torch.bfloat16),
                       torch.randn(batch, KV, visible, DIM, generator=g, device="cuda", dtype=torch.bfloat16))
                      for _ in range(nsets)]
        row["sdpa_us"] = time_in_graph(lambda i, c=contiguous: torch.nn.functional.scaled_dot_product_attention(
            *c[i], scale=DIM**-0.5, enable_gqa=True), nsets, args.reps) * 1e6
        del contiguous
        torch.cuda.empty_cache()
        results.append(row)
        top = ", ".join(f"{us:.1f} {_name(c)}" for us, c in timed[:4])
        print(f"B={batch:4d} ctx={context:6d} win={window:4d}: default {row['default_us']:7.1f} us, best {top}; "
              f"splits {row['splits']}; SDPA {row['sdpa_us']:.1f}", flush=True)

    print(f"\n| batch x context, window | KV MB | default us (% HBM) | best us (% HBM) | best config | splits (us) | "
          f"SDPA us | SDPA / best |\n|{'---|' * 8}")
    for r in results:
        def pct(us: float, r: dict = r) -> float:
            return 100 * r["kv_bytes"] / (us * 1e-6) / 1e9 / hbm
        b = r["best"]
        best_any = min([b["us"], *r["splits"].values()])
        print(f"| {r['batch']} x {r['context']}, {r['window']} | {r['kv_bytes'] / 1e6:.1f} | {r['default_us']:.1f} "
              f"({pct(r['default_us']):.0f}%) | {best_any:.1f} ({pct(best_any):.0f}%) | "
              f"n{b['block_n']} w{b['num_warps']} "
              f"s{b['num_stages']}{' kv-fastest' if b['kv_fastest'] else ''} | "
              f"{', '.join(f'{s}: {us}' for s, us in r['splits'].items())} | {r['sdpa_us']:.1f} | "
              f"{r['sdpa_us'] / best_any:.2f} |")
    if len(configs) <= 8:  # candidates: every config's time at every point
        names = [_name(c) for c in configs]
        print(f"\n| batch x context, window | default | {' | '.join(names)} | SDPA |\n|{'---|' * (len(names) + 3)}")
        for r in results:
            by_name = {_name(DecodeLaunchConfig(**{k: v for k, v in c.items() if k != "us"})): c["us"]
                       for c in r["configs"]}
            print(f"| {r['batch']} x {r['context']}, {r['window']} | {r['default_us']:.2f} | "
                  f"{' | '.join(str(by_name[n]) for n in names)} | {r['sdpa_us']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ceilings": ceilings, "empty_kernel_us": floor, "points": results}, f, indent=1)
    print(f"median best/default: {statistics.median(r['best']['us'] / r['default_us'] for r in results):.3f}")


if __name__ == "__main__":
    main()
