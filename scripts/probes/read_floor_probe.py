"""How fast can any kernel read the bytes the MoE reads at T = 1-4 (issue 15)? A pure read of the same experts'
weights, in a CUDA graph timed as the MoE is, against the engine's tuned GEMMs on the same experts.

The decode-sized MoE GEMMs read 37-41% of the 1 GiB copy rate at T = 1 whatever their structure (the fourteenth
session of 2026-11-30); the goal is 70%. If no kernel reads 17.7 MB (GEMM 2) or 35.4 MB (GEMM 1) in one launch much
faster than the GEMMs do, the goal is out of reach at these sizes; if a plain read does, its shape of loads is what a
GEMM should copy.

Reads (each program sums its slice of one expert's words into int32 partials; checked against torch's sum):
    read.P.W.B.U   P programs per expert, W warps, B int32 words per load (per program), U loads per loop step
    torch-sum      torch.sum over a contiguous copy of the same bytes (one launch; a bound from a library kernel)
    copy           a device-to-device copy of the same bytes (reads and writes them)
Each point rotates over 8 sets of distinct experts (consecutive calls share no expert, 32 experts of gpt-oss-20b
shapes: 425 MB, beyond L2), and, for comparison, over 4 sets of random experts, as `moe_sync_probe.py` times.

    PYTHONPATH=src python3 scripts/probes/read_floor_probe.py [--experts 4,8,15] [--json PATH] [--check-only]
    PYTHONPATH=src python3 scripts/probes/read_floor_probe.py --contiguous-mb 0.3,2.1,8.4

`--contiguous-mb`: instead, one contiguous region of each size a call (8 of them in turn), read by 8-528 programs:
the floor of a single small read, such as decode attention's KV bytes at 1 x 1k (2.1 MB) or a 128-key window (0.3 MB).

`--check-only` runs each read kernel once at a small size against torch's sum (works under TRITON_INTERPRET=1).
A probe, not a benchmark.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import triton
import triton.language as tl

HIDDEN, INTER, EXPERTS, TOP_K = 2880, 2880, 32, 4  # gpt-oss-20b (the 120b's experts have the same shape)
READ_VARIANTS = ["read.33.4.1024.1", "read.33.4.1024.4", "read.66.4.1024.2", "read.66.8.2048.2",
                 "read.132.4.1024.2", "read.132.4.512.4", "read.264.4.1024.1", "read.264.4.512.2",
                 "read.528.4.512.1", "read.16.8.2048.4", "read.8.8.2048.8"]


@triton.jit
def _read_kernel(src_ptr, ids_ptr, out_ptr, expert_stride, words, chunk, programs_per_expert,
                 BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    """Program p sums words [c * chunk, min((c + 1) * chunk, words)) of expert ids[p // P] (c = p % P) into BLOCK
    int32 partials (wrapping), so every load is used and none can be dropped."""
    pid = tl.program_id(0)
    expert = tl.load(ids_ptr + pid // programs_per_expert).to(tl.int64)
    start = (pid % programs_per_expert) * chunk
    end = tl.minimum(start + chunk, words)
    base = src_ptr + expert * expert_stride
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for k in range(start, end, BLOCK * UNROLL):
        for u in tl.static_range(UNROLL):
            idx = k + u * BLOCK + offs
            acc += tl.load(base + idx, mask=idx < end, other=0)
    tl.store(out_ptr + pid * BLOCK + offs, acc)


def read_experts(src: torch.Tensor, ids: torch.Tensor, programs: int, warps: int, block: int, unroll: int,
                 out: torch.Tensor | None = None) -> torch.Tensor:
    """src: [E, words] int32; ids: [n] int32 experts to read. Returns the [n * programs, block] int32 partials."""
    words = src.shape[1]
    chunk = -(-words // programs)
    chunk = -(-chunk // block) * block  # whole loads a program
    grid = ids.numel() * programs
    if out is None:
        out = torch.empty(grid, block, dtype=torch.int32, device=src.device)
    _read_kernel[(grid,)](src, ids, out, src.stride(0), words, chunk, programs, BLOCK=block, UNROLL=unroll,
                          num_warps=warps)
    return out


def read_experts_ref(src: torch.Tensor, ids: torch.Tensor) -> int:
    """The wrapped int32 sum of the experts' words, from int64 sums."""
    return int(src[ids.long()].to(torch.int64).sum().item()) & 0xFFFFFFFF


def _parse(variant: str) -> tuple[int, int, int, int]:
    _, p, w, b, u = variant.split(".")
    return int(p), int(w), int(b), int(u)


def check(device: torch.device) -> None:
    g = torch.Generator().manual_seed(0)
    src = torch.randint(-2**31, 2**31 - 1, (6, 5000), generator=g, dtype=torch.int32).to(device)
    ids = torch.tensor([4, 1, 3], dtype=torch.int32, device=device)
    want = read_experts_ref(src, ids)
    for variant in ("read.3.4.512.1", "read.2.4.256.4", "read.7.2.128.2"):
        got = int(read_experts(src, ids, *_parse(variant)).to(torch.int64).sum().item()) & 0xFFFFFFFF
        assert got == want, (variant, got, want)
        print(f"{variant}: sum matches torch ({got:#x})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experts", default="4,8,15",
                        help="experts read a call (T = 1, 2, 4 of gpt-oss-20b: 4, ~8, ~15)")
    parser.add_argument("--variants", default=",".join(READ_VARIANTS))
    parser.add_argument("--contiguous-mb", default="", help="instead: one contiguous region of each size (MB)")
    parser.add_argument("--json")
    parser.add_argument("--check-only", action="store_true")
    args = parser.parse_args()
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    check(device)
    if args.check_only:
        return
    from quickmoe.bench.attention import kernel_floor, time_in_graph
    from quickmoe.bench.moe import measure_ceilings

    hbm = measure_ceilings(device)["hbm_gb_per_s"] * 1e9
    floor_us = kernel_floor(device, 16) * 1e6
    print(f"HBM copy rate {hbm / 1e9:.0f} GB/s; one graph node's floor {floor_us:.2f} us", flush=True)
    g = torch.Generator().manual_seed(0)
    if args.contiguous_mb:
        rows = contiguous_rows([float(x) for x in args.contiguous_mb.split(",")], device, hbm, g)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
        return
    # the experts' MXFP4 words as the engine holds them: w1 [E, 2 I, H / 2] and w2 [E, H, I / 2] uint8, as int32
    w1 = torch.randint(-2**31, 2**31 - 1, (EXPERTS, 2 * INTER * HIDDEN // 8), generator=g, dtype=torch.int32).to(device)
    w2 = torch.randint(-2**31, 2**31 - 1, (EXPERTS, HIDDEN * INTER // 8), generator=g, dtype=torch.int32).to(device)
    variants = [v for v in args.variants.split(",") if v]
    rows = []
    for n in [int(x) for x in args.experts.split(",")]:
        disjoint = [torch.tensor([(s * n + j) % EXPERTS for j in range(n)], dtype=torch.int32, device=device)
                    for s in range(8)]
        random_sets = [torch.randperm(EXPERTS, generator=g)[:n].to(torch.int32).to(device) for _ in range(4)]
        for label, sets in (("distinct", disjoint), ("random", random_sets)):
            for gemm, src in (("w1", w1), ("w2", w2)):
                nbytes = n * src.shape[1] * 4
                contiguous = [src[s.long()].contiguous() for s in sets[:2]]  # for torch-sum and copy
                dst = torch.empty_like(contiguous[0])
                fns = {v: (lambda i, v=v: read_experts(src, sets[i], *_parse(v))) for v in variants}
                fns["torch-sum"] = lambda i: contiguous[i % 2].sum(dtype=torch.int64)
                fns["copy"] = lambda i: dst.copy_(contiguous[i % 2])
                for name, fn in fns.items():
                    if name.startswith("read."):
                        got = int(fn(0).to(torch.int64).sum().item()) & 0xFFFFFFFF
                        if got != read_experts_ref(src, sets[0]):
                            print(f"{name}: WRONG SUM", flush=True)
                            continue
                    nsets = len(sets) if name.startswith("read.") else 2
                    us = time_in_graph(fn, nsets, 16) * 1e6
                    moved = 2 * nbytes if name == "copy" else nbytes
                    rows.append({"experts": n, "sets": label, "tensor": gemm, "variant": name, "us": us,
                                 "bytes": nbytes, "pct_hbm": 100 * moved / (us * 1e-6) / hbm})
                    print(f"{n:3d} experts {label:8s} {gemm} {nbytes / 1e6:6.1f} MB {name:20s} {us:8.2f} us "
                          f"{moved / us / 1e3:6.0f} GB/s {rows[-1]['pct_hbm']:5.1f}%", flush=True)
        rows += moe_rows(n, disjoint, device, hbm)
    print("\nbest read per point (us, % of the copy rate), beside the engine's tuned GEMMs on the same experts")
    for n in sorted({r["experts"] for r in rows}):
        for label in ("distinct", "random"):
            for gemm in ("w1", "w2"):
                pts = [r for r in rows if r["experts"] == n and r["sets"] == label and r["tensor"] == gemm]
                if not pts:
                    continue
                reads = [r for r in pts if r["variant"].startswith("read.")]
                best = min(reads, key=lambda r: r["us"]) if reads else None
                other = "  ".join(f"{r['variant']} {r['us']:.2f} ({r['pct_hbm']:.0f}%)" for r in pts
                                  if not r["variant"].startswith("read."))
                print(f"{n:3d} {label:8s} {gemm}: best {best['variant']} {best['us']:.2f} us ({best['pct_hbm']:.0f}%)"
                      f"  {other}" if best else f"{n:3d} {label:8s} {gemm}: {other}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def contiguous_rows(sizes_mb: list[float], device: torch.device, hbm: float, g: torch.Generator) -> list[dict]:
    """One contiguous region a call, 8 regions in turn (beyond L2 for sizes >= 8 MB; smaller ones may hit L2 on
    the H200's 50 MB: a floor either way), each read by P programs of 4 warps."""
    from quickmoe.bench.attention import time_in_graph

    rows = []
    for mb in sizes_mb:
        words = int(mb * 1e6) // 4
        src = torch.randint(-2**31, 2**31 - 1, (8, words), generator=g, dtype=torch.int32).to(device)
        sets = [torch.tensor([s], dtype=torch.int32, device=device) for s in range(8)]
        best = None
        for p in (4, 8, 16, 33, 66, 132, 264, 528):
            for block, unroll in ((512, 1), (512, 2), (256, 2)):
                if p * block > words:
                    continue
                variant = f"read.{p}.4.{block}.{unroll}"
                fn = lambda i, p=p, b=block, u=unroll: read_experts(src, sets[i], p, 4, b, u)  # noqa: E731
                got = int(fn(0).to(torch.int64).sum().item()) & 0xFFFFFFFF
                if got != read_experts_ref(src, sets[0]):
                    print(f"{mb} MB {variant}: WRONG SUM", flush=True)
                    continue
                us = time_in_graph(fn, len(sets), 16) * 1e6
                rows.append({"mb": mb, "variant": variant, "us": us, "pct_hbm": 100 * words * 4 / (us * 1e-6) / hbm})
                print(f"{mb:6.2f} MB {variant:20s} {us:7.2f} us {rows[-1]['pct_hbm']:5.1f}%", flush=True)
                if best is None or us < best["us"]:
                    best = rows[-1]
        print(f"{mb:6.2f} MB: best {best['variant']} {best['us']:.2f} us ({best['pct_hbm']:.1f}% of the copy rate)",
              flush=True)
    return rows


def moe_rows(n: int, disjoint: list[torch.Tensor], device: torch.device, hbm: float) -> list[dict]:
    """The engine's tuned GEMM 1 and GEMM 2 at T = 1 with one token routed to each set's first 4 experts (n = 4), on
    the same distinct sets, so the GEMMs and the reads are timed alike."""
    if n != TOP_K:
        return []
    from quickmoe.bench.attention import time_in_graph
    from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
    from quickmoe.kernels.fused_moe import device_arch
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_configs import moe_kernel_config
    from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu, moe_gemm2

    spec = SHAPES["gpt-oss-20b"]
    g = torch.Generator().manual_seed(1)
    ex = make_experts(spec, "mxfp4", device, g)
    name, arch = torch.cuda.get_device_name(device), device_arch(device)
    cfg1 = moe_kernel_config(spec.experts, 2 * spec.inter, spec.hidden, "mxfp4", name, 1, arch=arch, proj="gate_up")
    cfg2 = moe_kernel_config(spec.experts, spec.hidden, spec.inter, "mxfp4", name, 1, arch=arch, proj="down")
    x = torch.randn(1, spec.hidden, generator=g).to(torch.bfloat16).to(device)
    inter = torch.randn(TOP_K, spec.inter, generator=g).to(torch.bfloat16).to(device)
    route = torch.rand(1, TOP_K, generator=g).to(device)
    aligns = [moe_align(s.view(1, TOP_K), spec.experts, cfg1.block_m) for s in disjoint]
    aligns2 = [moe_align(s.view(1, TOP_K), spec.experts, cfg2.block_m) for s in disjoint]
    w1b = TOP_K * (ex.w1[0].numel() + ex.kwargs["w1_scales"][0].numel())
    w2b = TOP_K * (ex.w2[0].numel() + ex.kwargs["w2_scales"][0].numel())
    fn1 = lambda i: moe_gemm1_swiglu(  # noqa: E731
        x, aligns[i], TOP_K, ex.w1, ex.b1, ex.kwargs["w1_scales"], GROUP, 7.0, 1.702, config=cfg1)
    fn2 = lambda i: moe_gemm2(inter, aligns2[i], route, ex.w2, ex.b2, ex.kwargs["w2_scales"], config=cfg2)  # noqa: E731
    rows = []
    for gemm, fn, nbytes, cfg in (("w1", fn1, w1b, cfg1), ("w2", fn2, w2b, cfg2)):
        us = time_in_graph(fn, len(disjoint), 16) * 1e6
        rows.append({"experts": n, "sets": "distinct", "tensor": gemm, "variant": "tuned-gemm", "us": us,
                     "bytes": nbytes, "pct_hbm": 100 * nbytes / (us * 1e-6) / hbm})
        print(f"{n:3d} experts distinct {gemm} {nbytes / 1e6:6.1f} MB tuned GEMM ({cfg}) "
              f"{us:8.2f} us {rows[-1]['pct_hbm']:5.1f}%", flush=True)
    return rows


if __name__ == "__main__":
    main()
