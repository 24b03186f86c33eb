"""Could a CUDA-core GEMV read the MoE's MXFP4 experts at T = 1 faster than the tensor-core GEMMs do? (issue 15)

At T = 1 the tensor-core GEMMs read gpt-oss-20b's experts at 37-39% of HBM and are bound in the SMs, not by
memory (docs/benchmarks.md, 2026-11-25 third session): the whole grid holds 1,440 warps (16 weight rows each, the
mma's M) at 182 registers, ~11 resident warps per SM, too few to hide the decode's dependent chains. A GEMV has no
such floor: any number of rows per program, no operand shuffles, one FMA per weight on the CUDA cores. This probe
times, each alone in a CUDA graph over rotating input sets (`scripts/tune_moe.py`'s timer), for the GEMM 1 (gate_up)
and GEMM 2 (down) shapes at T = 1:
- `tuned`: quickmoe's `moe_gemm1_swiglu` / `moe_gemm2` with their tuned configs (GEMM 1 includes its SwiGLU);
- `gemv`: out[a, n] = sum_k W[e_a, n, k] x[a // k_top, k] for each assignment a, the weights decoded by the kernels'
  own `weight_tile` (the PTX decode on the GPU), products summed in float32, either per K step (`sum`) or kept
  [rows, BLOCK_K] wide and summed once at the end (`wide`), over a grid of rows per program, BLOCK_K and warps;
- `pairs`: the GEMV multiplying the PTX decode's outputs as they come (two runs of 4 columns per word) by x
  gathered in that order: no decoded weight moved into column order;
- `load`: the same grid reading only the packed bytes (their sum): the bound of the access pattern.
It checks each GEMV against float32 torch on the dequantized weights, prints us, GB/s of the weights read and % of
HBM (a copy, measured in the run). A probe, not a benchmark: a GEMV that wins here still needs the epilogues
(bias, SwiGLU, routing weight) and the engine's tests before `bench moe` can count it.

PYTHONPATH=src python3 scripts/probes/mxfp4_gemv_probe.py [--shape gpt-oss-20b] [--rows 4,8,16] [--block-k 256,512]
    [--warps 1,2,4] [--json PATH]
CPU (TRITON_INTERPRET=1): --check-only runs the correctness checks on a small shape.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: the tuner's timer

from quickmoe.formats.mxfp4 import dequantize_mxfp4
from quickmoe.formats.mxfp4_mma_pairs import decode_mma_pairs
from quickmoe.kernels.moe_tiles import MXFP4_PAIRS_ACC_SCALE, mxfp4_scales, weight_tile

try:  # the PTX decode of the GPU kernels (its text's globals exist where triton does)
    from quickmoe.kernels.moe_tiles import MXFP4_PAIRS_TO_BF16_PTX
except ImportError:  # pragma: no cover
    MXFP4_PAIRS_TO_BF16_PTX = None


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, s_ptr, ids_ptr, out_ptr, N, stride_x, TOP_K: tl.constexpr, K: tl.constexpr,
                 ROWS: tl.constexpr, BLOCK_K: tl.constexpr, MODE: tl.constexpr, PTX: tl.constexpr,
                 WORK_DTYPE: tl.constexpr, ACC_SCALE: tl.constexpr):
    """out [A, N] float32: row a = W[ids[a]] @ x[a // TOP_K]. MODE 0: sum per K step, 1: wide accumulator,
    2: the packed bytes only (their sum: a load bound, not a product), 3 (PTX only): the decode's two outputs
    multiplied as they come out (low: columns 8g + 0..3 of word g, high: 8g + 4..7) by x gathered in that order,
    so no decoded weight is moved into column order."""
    a = tl.program_id(1)
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)  # [R]
    row_ok = rows < N
    expert = tl.load(ids_ptr + a).to(tl.int64)
    token = a // TOP_K
    acc = tl.zeros([ROWS], dtype=tl.float32)
    wide = tl.zeros([ROWS, BLOCK_K], dtype=tl.float32)
    packed_sum = tl.zeros([ROWS, BLOCK_K // 2], dtype=tl.int32)
    for k0 in range(0, K, BLOCK_K):
        if MODE == 2:
            byte_cols = k0 // 2 + tl.arange(0, BLOCK_K // 2)
            packed = tl.load(w_ptr + expert * N * (K // 2) + rows[:, None] * (K // 2) + byte_cols[None, :],
                             mask=row_ok[:, None] & (byte_cols[None, :] < K // 2), other=0)
            packed_sum += packed.to(tl.int32)
        elif MODE == 3:
            byte_cols = k0 // 2 + tl.arange(0, BLOCK_K // 2)  # [BK/2]
            packed = tl.load(w_ptr + expert * N * (K // 2) + rows[:, None] * (K // 2) + byte_cols[None, :],
                             mask=row_ok[:, None] & (byte_cols[None, :] < K // 2), other=0)  # [R, BK/2]
            scales = mxfp4_scales(s_ptr, expert, rows, row_ok, k0, N, K, BLOCK_K)  # [R, BK/32]
            scale = tl.reshape(tl.broadcast_to(scales[:, :, None], (ROWS, BLOCK_K // 32, 16)), (ROWS, BLOCK_K // 2))
            low, high = tl.inline_asm_elementwise(MXFP4_PAIRS_TO_BF16_PTX, "=r,=r,=r,=r,r,r,r,r,r",
                                                  [packed, scale], dtype=(tl.bfloat16, tl.bfloat16),
                                                  is_pure=True, pack=4)  # [R, BK/2] each
            j = tl.arange(0, BLOCK_K // 2)
            col_low = k0 + 8 * (j // 4) + j % 4  # [BK/2]
            x_low = tl.load(x_ptr + token * stride_x + col_low, mask=col_low < K, other=0.0).to(tl.float32)
            x_high = tl.load(x_ptr + token * stride_x + col_low + 4, mask=col_low + 4 < K, other=0.0).to(tl.float32)
            acc += tl.sum(low.to(tl.float32) * x_low[None, :] + high.to(tl.float32) * x_high[None, :], axis=1)
        else:
            kk = k0 + tl.arange(0, BLOCK_K)
            x = tl.load(x_ptr + token * stride_x + kk, mask=kk < K, other=0.0).to(tl.float32)  # [BK]
            scales = mxfp4_scales(s_ptr, expert, rows, row_ok, k0, N, K, BLOCK_K) if PTX else 0
            w = weight_tile(w_ptr, s_ptr, expert, rows, row_ok, k0, N, K, True, False, ROWS, BLOCK_K,
                             WORK_DTYPE, PTX, PTX, scales).to(tl.float32)  # [R, BK]
            if MODE == 0:
                acc += tl.sum(w * x[None, :], axis=1)
            else:
                wide += w * x[None, :]
    if MODE == 1:
        acc = tl.sum(wide, axis=1)
    if MODE == 2:
        acc = tl.sum(packed_sum, axis=1).to(tl.float32)
    tl.store(out_ptr + a * N + rows, acc * ACC_SCALE, mask=row_ok)


def gemv(x: torch.Tensor, w: torch.Tensor, scales: torch.Tensor, ids: torch.Tensor, rows: int, block_k: int,
         warps: int, mode: int) -> torch.Tensor:
    """x [T, K] bf16, w [E, N, K/2] uint8 (mma-pair order), scales [E, K/32, N] uint8, ids [T, k] -> [T*k, N]."""
    n, k = w.shape[1], w.shape[2] * 2
    assignments = ids.numel()
    out = torch.empty(assignments, n, dtype=torch.float32, device=x.device)
    ptx = x.device.type == "cuda"
    _gemv_kernel[(triton.cdiv(n, rows), assignments)](
        x, w, scales, ids.reshape(-1), out, n, x.stride(0), TOP_K=ids.shape[1], K=k, ROWS=rows, BLOCK_K=block_k,
        MODE=mode, PTX=ptx, WORK_DTYPE=tl.bfloat16 if ptx else tl.float32,
        ACC_SCALE=MXFP4_PAIRS_ACC_SCALE if ptx else 1.0, num_warps=warps)
    return out


def reference(x: torch.Tensor, w: torch.Tensor, scales: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """float32 torch on the dequantized weights: [T*k, N]."""
    e, n, half_k = w.shape
    plain = decode_mma_pairs(w).reshape(e, n, half_k // 16, 16)
    dense = dequantize_mxfp4(plain, scales.transpose(1, 2).contiguous()).reshape(e, n, 2 * half_k)  # [E, N, K]
    top_k = ids.shape[1]
    rows = [dense[int(ids.reshape(-1)[a])] @ x[a // top_k].float() for a in range(ids.numel())]
    return torch.stack(rows)


def make(experts: int, n: int, k: int, tokens: int, top_k: int, device, g):
    w = torch.randint(0, 256, (experts, n, k // 2), dtype=torch.uint8, generator=g).to(device)
    scales = torch.randint(119, 124, (experts, k // 32, n), dtype=torch.uint8, generator=g).to(device)
    x = torch.randn(tokens, k, generator=g).to(torch.bfloat16).to(device)
    ids = torch.stack([torch.randperm(experts, generator=g)[:top_k] for _ in range(tokens)]).to(torch.int32)
    return x, w, scales, ids.to(device)


def check(device, g, rows_list, block_ks, warps_list, experts=4, n=48, k=320, tokens=1, top_k=2) -> float:
    """Largest relative error of every GEMV variant against the float32 reference (bf16 products are exact)."""
    x, w, scales, ids = make(experts, n, k, tokens, top_k, device, g)
    ref = reference(x, w, scales, ids)
    worst = 0.0
    modes = (0, 1, 3) if device.type == "cuda" else (0, 1)
    for rows, block_k, warps, mode in itertools.product(rows_list, block_ks, warps_list, modes):
        got = gemv(x, w, scales, ids, rows, block_k, warps, mode)
        err = ((got - ref).abs().max() / ref.abs().max()).item()
        worst = max(worst, err)
        if err > 1e-5:
            print(f"WRONG: GEMV rows {rows} block_k {block_k} warps {warps} mode {mode}: relative error {err:.2e}")
    return worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="gpt-oss-20b")
    ap.add_argument("--rows", default="4,8,16")
    ap.add_argument("--block-k", default="256,512")
    ap.add_argument("--warps", default="1,2,4")
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    ints = lambda text: [int(v) for v in text.split(",")]  # noqa: E731
    g = torch.Generator().manual_seed(0)
    if args.check_only or os.environ.get("TRITON_INTERPRET") == "1":
        worst = check(torch.device("cpu"), g, [4, 8], [64, 128], [1])
        print(f"GEMV variants against float32 torch: worst relative error {worst:.2e}")
        return
    device = torch.device("cuda")
    worst = check(device, g, ints(args.rows), ints(args.block_k), ints(args.warps))
    print(f"GEMV variants against float32 torch (GPU, small shape): worst relative error {worst:.2e}")
    from tune_moe import SETS, graph_seconds

    from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
    from quickmoe.kernels import moe_configs
    from quickmoe.kernels.fused_moe import device_arch
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu, moe_gemm2
    from quickmoe.kernels.routing import route_ref

    spec = SHAPES[args.shape]
    ex = make_experts(spec, "mxfp4", device, g)
    routes = [route_ref(torch.randn(1, spec.experts, generator=g).to(device), spec.top_k) for _ in range(SETS)]
    ids_sets = [ids for _, ids in routes]  # [1, k] each
    xs = [torch.randn(1, spec.hidden, generator=g).to(torch.bfloat16).to(device) for _ in range(SETS)]
    inter = [torch.randn(spec.top_k, spec.inter, generator=g).to(torch.bfloat16).to(device) for _ in range(SETS)]
    aligns = [moe_align(ids, spec.experts, 16) for ids in ids_sets]
    name = torch.cuda.get_device_name(device)
    arch = device_arch(device)  # a device without its own files borrows its architecture's
    copy_src = torch.empty(1 << 28, dtype=torch.uint8, device=device)
    copy_dst = torch.empty_like(copy_src)
    hbm = copy_src.numel() * 2 / graph_seconds(lambda i: copy_dst.copy_(copy_src), 1)  # bytes/s, read + write
    results = []
    for which, w, scales, n, k in ((1, ex.w1, ex.kwargs["w1_scales"], 2 * spec.inter, spec.hidden),
                                   (2, ex.w2, ex.kwargs["w2_scales"], spec.hidden, spec.inter)):
        nbytes = spec.top_k * n * (k // 2 + k // 32)  # the experts' packed codes and scales read at T = 1
        config = moe_configs.moe_kernel_config(spec.experts, 2 * spec.inter if which == 1 else spec.hidden,
                                               spec.hidden if which == 1 else spec.inter, "mxfp4", name, 1, arch=arch,
                                               proj="gate_up" if which == 1 else "down")
        if which == 1:
            tuned = graph_seconds(lambda i: moe_gemm1_swiglu(
                xs[i], aligns[i], spec.top_k, ex.w1, ex.b1, scales, GROUP, 7.0, 1.702, out_dtype=torch.bfloat16,
                config=config, activation=spec.activation), SETS)
            acts = xs
        else:
            tuned = graph_seconds(lambda i: moe_gemm2(inter[i], aligns[i], routes[i][0], ex.w2, ex.b2,
                                                      scales, out_dtype=torch.bfloat16, config=config), SETS)
            acts = inter
        rows_of = (lambda i: ids_sets[i]) if which == 1 else (lambda i: ids_sets[i].reshape(-1, 1))
        print(f"\nGEMM {which} ({args.shape}, N {n}, K {k}, T = 1: {nbytes / 1e6:.1f} MB of experts; HBM "
              f"{hbm / 1e9:.0f} GB/s): tuned {tuned * 1e6:.1f} us ({nbytes / tuned / hbm * 100:.0f}% of HBM), {config}")
        rows_timed = [("tuned", 0, 0, config.num_warps, tuned)]
        for rows, block_k, warps, mode in itertools.product(ints(args.rows), ints(args.block_k), ints(args.warps),
                                                            (0, 1, 2, 3)):
            try:
                sec = graph_seconds(lambda i: gemv(acts[i], w, scales, rows_of(i), rows, block_k, warps, mode), SETS)
            except Exception as exc:  # noqa: BLE001 - a probe: a variant too big for the chip is skipped
                print(f"  rows {rows} block_k {block_k} warps {warps} mode {mode}: skipped ({type(exc).__name__})")
                continue
            rows_timed.append((("sum", "wide", "load", "pairs")[mode], rows, block_k, warps, sec))
        rows_timed.sort(key=lambda r: r[-1])
        print(f"  {'variant':8} {'rows':>4} {'BK':>4} {'warps':>5} {'us':>7} {'GB/s':>6} {'%HBM':>5}")
        shown = rows_timed[:10] + [r for r in rows_timed[10:] if r[0] in ("tuned", "pairs", "sum")][:6]
        for kind, rows, block_k, warps, sec in shown:
            print(f"  {kind:8} {rows:4d} {block_k:4d} {warps:5d} {sec * 1e6:7.1f} {nbytes / sec / 1e9:6.0f} "
                  f"{nbytes / sec / hbm * 100:5.0f}")
        results.append({"gemm": which, "bytes": nbytes, "hbm": hbm, "timed": [
            {"kind": kd, "rows": r, "block_k": bk, "warps": wp, "us": s * 1e6} for kd, r, bk, wp, s in rows_timed]})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print("\n(us: median of 5 graph replays of 16 calls each)")


if __name__ == "__main__":
    main()
