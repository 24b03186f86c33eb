"""Would Gluon's explicit wgmma waits lift the block-scaled FP8 GEMM? (issue 18: the FP8 MoE at T = 8,192 is at
~41% of the FP8 rate on Qwen3-30B-A3B, and the Triton kernels wait for every scaled wgmma before its promotion).

A dense block-scaled FP8 GEMM written in Gluon (`triton.experimental.gluon`, Triton 3.6): activations [M, K] e4m3
with a float32 scale per row and 128 columns, weights [N, K] e4m3 with one per 128 x 128 block, out bf16. Tiles
come by TMA into a ring of STAGES shared-memory buffers (one mbarrier each). Each 128-column step's wgmma goes
into one of two register tiles (use_acc=False) asynchronously; the step before it is then waited for with
`warpgroup_mma_wait(num_outstanding=1)`, scaled by its factor and added to the float32 accumulator while the
new wgmma runs, and its buffers are refilled with the step STAGES ahead. Timed beside our Triton kernel
(`fp8_block_linear`, the FP8 dense layers' GEMM, at its prefill config and at 128 x 128 tiles) and
`torch._scaled_mm` with per-tensor scales (the rate ceiling `bench moe` uses), after a check against
`fp8_block_linear_ref`. That version lost (2026-11-30 second session: 254 registers, one program an SM). The
warp-specialized persistent version beside it (`_gluon_fp8_ws_kernel`, see its comment) gives the TMA to a
producer warp and the consumers 240 registers by setmaxnreg (compiled for sm_90 on the CPU: 12 warps, no spills;
not yet run on a GPU).

    PYTHONPATH=src python3 scripts/probes/gluon_fp8_probe.py [--json PATH]        # on the GPU
    PYTHONPATH=src python3 scripts/probes/gluon_fp8_probe.py --compile-only      # sm_90 PTX/SASS stats, no GPU

A probe, not a benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import torch

os.environ.pop("TRITON_INTERPRET", None)

import triton  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import (  # noqa: E402
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402

BK = 128  # one scale group a step
SHAPES = {"qwen3-gemm1-like": (8192, 1536, 2048), "qwen3-gemm2-like": (8192, 2048, 768),
          "square-4k": (8192, 4096, 4096)}
CONFIGS = [(128, 128, 8, 4), (128, 128, 8, 3), (128, 64, 4, 4), (64, 128, 4, 4)]  # BM, BN, warps, stages


@gluon.jit
def _load_step(j, a_desc, b_desc, a_smem, b_smem, ready, off_m, off_n, pred, STAGES: gl.constexpr):
    s = j % STAGES
    mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(a_desc, [off_m, j * 128], ready.index(s), a_smem.index(s), pred=pred)
    tma.async_copy_global_to_shared(b_desc, [off_n, j * 128], ready.index(s), b_smem.index(s), pred=pred)


@gluon.jit
def _factor(j, as_ptr, ws_ptr, rows, row_ok, stride_as, ws_row, stride_ws):
    """Step j's factor per row [BM]: activation scale x the block's weight scale."""
    a_s = gl.load(as_ptr + rows * stride_as + j, mask=row_ok, other=0.0)
    return a_s * gl.load(ws_ptr + ws_row * stride_ws + j)


@gluon.jit
def _issue_then_promote(j, x, y, f_y, acc, a_desc, b_desc, a_smem, b_smem, ready, off_m, off_n, nk, as_ptr, ws_ptr,
                        rows, row_ok, stride_as, ws_row, stride_ws, STAGES: gl.constexpr):
    """Step j's wgmma into x (async); then step j - 1 (in y) waited for, scaled by f_y and added to acc while step j
    runs; its buffers refilled with step j - 1 + STAGES. -> (x, step j's factor, acc)."""
    s = j % STAGES
    mbarrier.wait(ready.index(s), (j // STAGES) & 1)
    x = warpgroup_mma(a_smem.index(s), b_smem.index(s).permute((1, 0)), x, use_acc=False, is_async=True)
    f_x = _factor(j, as_ptr, ws_ptr, rows, row_ok, stride_as, ws_row, stride_ws)
    # both through the wait (loop-carried values stay tensors); x may still be in flight: read only after the next
    x, y = warpgroup_mma_wait(num_outstanding=1, deps=(x, y))
    acc += y * f_y[:, None]
    _load_step(j - 1 + STAGES, a_desc, b_desc, a_smem, b_smem, ready, off_m, off_n, j - 1 + STAGES < nk, STAGES)
    return x, f_x, acc


@gluon.jit
def _gluon_fp8_kernel(a_desc, b_desc, as_ptr, ws_ptr, out_ptr, M, N, K, stride_as, stride_ws, stride_out,
                      BM: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr, num_warps: gl.constexpr):
    num_n = gl.cdiv(N, BN)
    pid = gl.program_id(0)
    off_m = (pid // num_n) * BM
    off_n = (pid % num_n) * BN
    nk = K // 128  # even, >= STAGES (the probe's shapes)
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 32])
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, 128], a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BN, 128], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
    for i in gl.static_range(STAGES):
        _load_step(i, a_desc, b_desc, a_smem, b_smem, ready, off_m, off_n, True, STAGES)
    rows = off_m + gl.arange(0, BM, layout=gl.SliceLayout(1, mma))
    row_ok = rows < M
    ws_row = off_n // 128
    acc = gl.zeros((BM, BN), dtype=gl.float32, layout=mma)
    t0 = gl.zeros((BM, BN), dtype=gl.float32, layout=mma)
    t1 = gl.zeros((BM, BN), dtype=gl.float32, layout=mma)
    # step 0 into t0
    mbarrier.wait(ready.index(0), 0)
    t0 = warpgroup_mma(a_smem.index(0), b_smem.index(0).permute((1, 0)), t0, use_acc=False, is_async=True)
    t0 = warpgroup_mma_wait(num_outstanding=1, deps=(t0, ))  # nothing waited for (one in flight): a tensor again
    f0 = _factor(0, as_ptr, ws_ptr, rows, row_ok, stride_as, ws_row, stride_ws)
    for j in range(1, nk - 1, 2):  # steps j (into t1) and j + 1 (into t0)
        t1, f1, acc = _issue_then_promote(j, t1, t0, f0, acc, a_desc, b_desc, a_smem, b_smem, ready, off_m, off_n,
                                          nk, as_ptr, ws_ptr, rows, row_ok, stride_as, ws_row, stride_ws, STAGES)
        t0, f0, acc = _issue_then_promote(j + 1, t0, t1, f1, acc, a_desc, b_desc, a_smem, b_smem, ready, off_m,
                                          off_n, nk, as_ptr, ws_ptr, rows, row_ok, stride_as, ws_row, stride_ws,
                                          STAGES)
    t1, f1, acc = _issue_then_promote(nk - 1, t1, t0, f0, acc, a_desc, b_desc, a_smem, b_smem, ready, off_m, off_n,
                                      nk, as_ptr, ws_ptr, rows, row_ok, stride_as, ws_row, stride_ws, STAGES)
    t1 = warpgroup_mma_wait(num_outstanding=0, deps=(t1, ))
    acc += t1 * f1[:, None]
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))
    cols = off_n + gl.arange(0, BN, layout=gl.SliceLayout(0, mma))
    ok = row_ok[:, None] & (cols < N)[None, :]
    gl.store(out_ptr + rows[:, None] * stride_out + cols[None, :], acc.to(gl.bfloat16), mask=ok)


# --- the same GEMM warp-specialized and persistent (2026-11-30 seventh session; not yet run on a GPU) -------------
# One program an SM loops over output tiles. A producer partition (1 warp, 40 registers) keeps a ring of STAGES
# shared-memory stages full by TMA, a step ahead of the consumers as far as the ring allows, across tile boundaries
# (the next tile's first steps load during this tile's last steps and its epilogue). The default partition (8 warps:
# two warpgroups, 64 rows of a 128-row tile each, up to 232 registers with setmaxnreg) issues each step's wgmma
# asynchronously into one of two temporaries, waits for the step before (num_outstanding=1), releases its stage to
# the producer and promotes it (scale, add) while the new one runs: the consumers never wait for a TMA they issued
# or for their own loads, and no program leaves an SM idle between tiles.
WS_CONFIGS = [(128, 128, 4), (128, 128, 5), (128, 64, 6)]  # BM, BN, stages (8 consumer warps, 1 producer warp)


@gluon.jit
def _ws_producer(a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K, BM: gl.constexpr, BN: gl.constexpr,
                 STAGES: gl.constexpr):
    num_n = gl.cdiv(N, BN)
    num_tiles = gl.cdiv(M, BM) * num_n
    nk = K // 128
    g = 0  # steps loaded so far over all tiles: stage g % STAGES, its phase (g // STAGES) & 1
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        off_m = (tile // num_n) * BM
        off_n = (tile % num_n) * BN
        for j in range(nk):
            s = g % STAGES
            mbarrier.wait(empty.index(s), ((g // STAGES) & 1) ^ 1)  # the first pass finds every stage free
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [off_m, j * 128], ready.index(s), a_smem.index(s))
            tma.async_copy_global_to_shared(b_desc, [off_n, j * 128], ready.index(s), b_smem.index(s))
            g += 1


@gluon.jit
def _ws_step(g, x, y, f_y, acc, a_smem, b_smem, ready, empty, j, as_ptr, ws_ptr, rows, row_ok, stride_as, ws_row,
             stride_ws, STAGES: gl.constexpr):
    """Global step g (the tile's step j) into x, asynchronously; then the step before (in y, its stage g - 1)
    waited for, its stage released and it promoted into acc with f_y while step g runs. -> (x, f_x, acc)."""
    s = g % STAGES
    mbarrier.wait(ready.index(s), (g // STAGES) & 1)
    x = warpgroup_mma(a_smem.index(s), b_smem.index(s).permute((1, 0)), x, use_acc=False, is_async=True)
    f_x = _factor(j, as_ptr, ws_ptr, rows, row_ok, stride_as, ws_row, stride_ws)
    x, y = warpgroup_mma_wait(num_outstanding=1, deps=(x, y))
    mbarrier.arrive(empty.index((g - 1) % STAGES), count=1)
    acc += y * f_y[:, None]
    return x, f_x, acc


@gluon.jit
def _ws_consumer(a_smem, b_smem, ready, empty, as_ptr, ws_ptr, out_ptr, M, N, K, stride_as, stride_ws, stride_out,
                 BM: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr, num_warps: gl.constexpr):
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 32])
    num_n = gl.cdiv(N, BN)
    num_tiles = gl.cdiv(M, BM) * num_n
    nk = K // 128  # even (the probe's shapes)
    g = 0
    for tile in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        off_m = (tile // num_n) * BM
        off_n = (tile % num_n) * BN
        rows = off_m + gl.arange(0, BM, layout=gl.SliceLayout(1, mma))
        row_ok = rows < M
        ws_row = off_n // 128
        acc = gl.zeros((BM, BN), dtype=gl.float32, layout=mma)
        t0 = gl.zeros((BM, BN), dtype=gl.float32, layout=mma)
        t1 = gl.zeros((BM, BN), dtype=gl.float32, layout=mma)
        s = g % STAGES
        mbarrier.wait(ready.index(s), (g // STAGES) & 1)
        t0 = warpgroup_mma(a_smem.index(s), b_smem.index(s).permute((1, 0)), t0, use_acc=False, is_async=True)
        t0 = warpgroup_mma_wait(num_outstanding=1, deps=(t0, ))
        f0 = _factor(0, as_ptr, ws_ptr, rows, row_ok, stride_as, ws_row, stride_ws)
        for j in range(1, nk - 1, 2):  # steps j (into t1) and j + 1 (into t0)
            t1, f1, acc = _ws_step(g + j, t1, t0, f0, acc, a_smem, b_smem, ready, empty, j, as_ptr, ws_ptr, rows,
                                   row_ok, stride_as, ws_row, stride_ws, STAGES)
            t0, f0, acc = _ws_step(g + j + 1, t0, t1, f1, acc, a_smem, b_smem, ready, empty, j + 1, as_ptr, ws_ptr,
                                   rows, row_ok, stride_as, ws_row, stride_ws, STAGES)
        t1, f1, acc = _ws_step(g + nk - 1, t1, t0, f0, acc, a_smem, b_smem, ready, empty, nk - 1, as_ptr, ws_ptr,
                               rows, row_ok, stride_as, ws_row, stride_ws, STAGES)
        t1 = warpgroup_mma_wait(num_outstanding=0, deps=(t1, ))
        mbarrier.arrive(empty.index((g + nk - 1) % STAGES), count=1)
        acc += t1 * f1[:, None]
        g += nk
        cols = off_n + gl.arange(0, BN, layout=gl.SliceLayout(0, mma))
        ok = row_ok[:, None] & (cols < N)[None, :]
        gl.store(out_ptr + rows[:, None] * stride_out + cols[None, :], acc.to(gl.bfloat16), mask=ok)


@gluon.jit
def _gluon_fp8_ws_kernel(a_desc, b_desc, as_ptr, ws_ptr, out_ptr, M, N, K, stride_as, stride_ws, stride_out,
                         BM: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr, num_warps: gl.constexpr):
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, 128], a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BN, 128], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    gl.warp_specialize([
        (_ws_consumer, (a_smem, b_smem, ready, empty, as_ptr, ws_ptr, out_ptr, M, N, K, stride_as, stride_ws,
                        stride_out, BM, BN, STAGES, num_warps)),
        (_ws_producer, (a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K, BM, BN, STAGES)),
    ], [1], [40])


WS_MAXNREG = 168  # 8 consumer warps + a warpgroup for the producer: 12 x 32 x 168 <= 65,536; setmaxnreg moves them


def gluon_fp8_ws_gemm(x_q, x_scales, w, w_scale_inv, bm, bn, stages, num_sms=None):
    m, k = x_q.shape
    n = w.shape[0]
    assert k % 256 == 0 and k // 128 >= 2 and bn <= 128 and 128 % bn == 0
    out = torch.empty(m, n, dtype=torch.bfloat16, device=x_q.device)
    a_layout, b_layout = _layouts(bm, bn)
    a_desc = TensorDescriptor.from_tensor(x_q, [bm, BK], a_layout)
    b_desc = TensorDescriptor.from_tensor(w, [bn, BK], b_layout)
    num_sms = num_sms or torch.cuda.get_device_properties(x_q.device).multi_processor_count
    grid = (min(num_sms, triton.cdiv(m, bm) * triton.cdiv(n, bn)),)
    _gluon_fp8_ws_kernel[grid](a_desc, b_desc, x_scales, w_scale_inv, out, m, n, k, x_scales.stride(0),
                               w_scale_inv.stride(0), out.stride(0), BM=bm, BN=bn, STAGES=stages, num_warps=8,
                               maxnreg=WS_MAXNREG)
    return out


def _layouts(bm: int, bn: int):
    return (gl.NVMMASharedLayout.get_default_for([bm, BK], gl.float8e4nv),
            gl.NVMMASharedLayout.get_default_for([bn, BK], gl.float8e4nv))


def gluon_fp8_gemm(x_q, x_scales, w, w_scale_inv, bm, bn, warps, stages):
    m, k = x_q.shape
    n = w.shape[0]
    assert k % 256 == 0 and k // 128 >= stages and bn <= 128 and 128 % bn == 0
    out = torch.empty(m, n, dtype=torch.bfloat16, device=x_q.device)
    a_layout, b_layout = _layouts(bm, bn)
    a_desc = TensorDescriptor.from_tensor(x_q, [bm, BK], a_layout)
    b_desc = TensorDescriptor.from_tensor(w, [bn, BK], b_layout)
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    _gluon_fp8_kernel[grid](a_desc, b_desc, x_scales, w_scale_inv, out, m, n, k, x_scales.stride(0),
                            w_scale_inv.stride(0), out.stride(0), BM=bm, BN=bn, STAGES=stages, num_warps=warps)
    return out


def _compiled_for_hopper(kernel_fn, bm: int, bn: int, stages: int, warps: int, maxnreg: int | None = None):
    """(the kernel compiled for sm_90, its resource line, its SASS) without a GPU."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    a_layout, b_layout = _layouts(bm, bn)
    signature = {"a_desc": f"tensordesc<fp8e4nv[{bm}, {BK}],{a_layout!r}>",
                 "b_desc": f"tensordesc<fp8e4nv[{bn}, {BK}],{b_layout!r}>",
                 "as_ptr": "*fp32", "ws_ptr": "*fp32", "out_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32",
                 "stride_as": "i32", "stride_ws": "i32", "stride_out": "i32", "BM": "constexpr",
                 "BN": "constexpr", "STAGES": "constexpr", "num_warps": "constexpr"}
    constexprs = {"BM": bm, "BN": bn, "STAGES": stages, "num_warps": warps}
    options = {"num_warps": warps, **({"maxnreg": maxnreg} if maxnreg else {})}
    kernel = triton.compile(GluonASTSource(kernel_fn, signature, constexprs), target=GPUTarget("cuda", 90, 32),
                            options=options)
    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "kernel.cubin"
        cubin.write_bytes(kernel.asm["cubin"])
        usage = subprocess.run([str(tools / "cuobjdump"), "-res-usage", str(cubin)], capture_output=True,
                               text=True).stdout
        sass = subprocess.run([str(tools / "nvdisasm"), "-c", str(cubin)], capture_output=True, text=True).stdout
    return kernel, next((line.strip() for line in usage.splitlines() if "REG:" in line), "no resource usage"), sass


def compile_only() -> None:
    for bm, bn, warps, stages in CONFIGS:
        kernel, usage, sass = _compiled_for_hopper(_gluon_fp8_kernel, bm, bn, stages, warps)
        ptx = kernel.asm["ptx"]
        print(f"BM {bm} BN {bn} warps {warps} stages {stages}: {usage}; PTX wgmma {ptx.count('wgmma.mma_async')}, "
              f"wait_group {[line.strip() for line in ptx.splitlines() if 'wgmma.wait_group' in line]}; "
              f"SASS QGMMA {sass.count('QGMMA')}, WARPGROUP.DEPBAR {sass.count('WARPGROUP.DEPBAR')}", flush=True)
    for bm, bn, stages in WS_CONFIGS:
        kernel, usage, sass = _compiled_for_hopper(_gluon_fp8_ws_kernel, bm, bn, stages, 8, WS_MAXNREG)
        setmaxnreg = sorted(set(re.findall(r"USETMAXREG[^;]*", sass)))
        print(f"warp-specialized BM {bm} BN {bn} stages {stages}: {usage}; warps {kernel.metadata.num_warps}; "
              f"setmaxnreg {setmaxnreg}; SASS QGMMA {sass.count('QGMMA')}, WARPGROUP.DEPBAR "
              f"{sass.count('WARPGROUP.DEPBAR')}, UTMALDG {sass.count('UTMALDG')}, SYNCS {sass.count('SYNCS')}",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.compile_only:
        compile_only()
        return
    from quickmoe.bench.attention import time_in_graph
    from quickmoe.kernels.fp8_gemm import Fp8GemmConfig, fp8_block_linear, fp8_block_linear_ref

    device = torch.device("cuda")
    g = torch.Generator().manual_seed(0)
    rows = []
    for name, (m, n, k) in SHAPES.items():
        x_q = (torch.randn(m, k, generator=g) * 2).to(device).to(torch.float8_e4m3fn)
        x_s = (torch.rand(m, k // 128, generator=g) * 0.02 + 0.001).to(device)
        w = torch.randn(n, k, generator=g).to(device).to(torch.float8_e4m3fn)
        w_s = (torch.rand(triton.cdiv(n, 128), k // 128, generator=g) * 0.02 + 0.001).to(device)
        rows_checked = torch.cat([torch.arange(256), torch.arange(m - 256, m)]).to(device)  # the first and last tiles
        ref = fp8_block_linear_ref(x_q[rows_checked], x_s[rows_checked], w, w_s, (128, 128)).float()
        flop = 2 * m * n * k
        one = torch.ones((), device=device)
        results = {"scaled_mm (per-tensor)": time_in_graph(
            lambda i: torch._scaled_mm(x_q, w.t(), one, one, out_dtype=torch.bfloat16), 1, 10)}
        for label, cfg in (("triton 64x128 w4 s3 (shipped)", None),
                           ("triton 128x128 w8 s3", Fp8GemmConfig(128, 128, num_warps=8, num_stages=3)),
                           ("triton 128x128 w4 s4", Fp8GemmConfig(128, 128, num_warps=4, num_stages=4))):
            try:
                got = fp8_block_linear(x_q, x_s, w, w_s, (128, 128), config=cfg)
                err = ((got[rows_checked].float() - ref).abs().max() / ref.abs().max()).item()
                results[f"{label} (err {err:.1e})"] = time_in_graph(
                    lambda i, c=cfg: fp8_block_linear(x_q, x_s, w, w_s, (128, 128), config=c), 1, 10)
            except Exception as exc:  # noqa: BLE001 - a probe reports and goes on
                print(f"{name} {label}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        for bm, bn, warps, stages in CONFIGS:
            label = f"gluon {bm}x{bn} w{warps} s{stages}"
            try:
                got = gluon_fp8_gemm(x_q, x_s, w, w_s, bm, bn, warps, stages)
                err = ((got[rows_checked].float() - ref).abs().max() / ref.abs().max()).item()
                results[f"{label} (err {err:.1e})"] = time_in_graph(
                    lambda i, c=(bm, bn, warps, stages): gluon_fp8_gemm(x_q, x_s, w, w_s, *c), 1, 10)
            except Exception as exc:  # noqa: BLE001
                print(f"{name} {label}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
        for bm, bn, stages in WS_CONFIGS:
            label = f"gluon warp-specialized {bm}x{bn} s{stages}"
            try:
                got = gluon_fp8_ws_gemm(x_q, x_s, w, w_s, bm, bn, stages)
                err = ((got[rows_checked].float() - ref).abs().max() / ref.abs().max()).item()
                results[f"{label} (err {err:.1e})"] = time_in_graph(
                    lambda i, c=(bm, bn, stages): gluon_fp8_ws_gemm(x_q, x_s, w, w_s, *c), 1, 10)
            except Exception as exc:  # noqa: BLE001
                print(f"{name} {label}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
        for label, sec in results.items():
            row = {"shape": name, "m": m, "n": n, "k": k, "kernel": label, "us": sec * 1e6,
                   "tflops": flop / sec / 1e12}
            rows.append(row)
            print(f"{name:18s} {label:44s} {sec * 1e6:9.1f} us {row['tflops']:7.1f} TFLOP/s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
