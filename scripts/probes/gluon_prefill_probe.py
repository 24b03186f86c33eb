"""Prefill attention in Gluon with the K/V copies issued a whole key step ahead: does hiding their latency close
the gap to SDPA (cuDNN) that the Triton kernel leaves?

Nsight Compute (docs/benchmarks.md, 2026-12-01 fourth session) put 11.9% of the Triton kernel's warp samples at
4 x 2,048 on the whole-tile loop's first instruction, waiting for the step's K and V: Triton's pipeliner issues
the next step's `cp.async` copies at the end of the step, after its PV wgmma, so nothing hides their latency, and
the loop cannot be told otherwise (with 3 stages it still waits for every group; block ids carried by hand made it
give up pipelining). Gluon (`triton.experimental.gluon`) places each copy, commit and wait explicitly.

`_gluon_prefill_kernel` computes what `paged_prefill_attention` does for full layers (no window) of gpt-oss's
shapes: 8 query heads a KV head, heads of 64, a head-major paged cache of 16-position blocks, sinks. Its tiles are
the Triton kernel's: 16 queries x the group's 8 heads = 128 rows on 8 warps (two warpgroups), 64 keys a step,
query tiles on multiples of 16, the longest first, an online softmax in base 2 seeded with the sink, the diagonal
masked behind a runtime branch. Unlike it: a ring of STAGES buffers of K and V whose step t + STAGES - 1 is issued
at the top of step t, right after the barrier that ends step t - 1 (its buffer is free then), so a copy has
STAGES - 1 whole steps to land; the block ids of a step are loaded one step before its copies.

    python3 scripts/probes/gluon_prefill_probe.py --compile-only     # sm_90 on a machine without a GPU
    python3 scripts/probes/gluon_prefill_probe.py [--stages 2,3] [--maxnreg 128] [--json out.json]

On the GPU: each stage count's output against the float32 reference at the smallest point and against the Triton
kernel's at every point (max abs difference), then both timed in CUDA graphs (`bench attention`'s
`time_in_graph`) beside SDPA on contiguous keys.

Compiled for sm_90 on the development machine (2026-12-01 fourth session): 112 registers under the cap of 128, no
stack; the key loop 395 SASS instructions a thread with the diagonal's masked branch (Triton's: 443), the copies of
the step ahead issued right after the loop's first barrier. Prediction: most of the 11.9% of samples waiting for K
and V go, so 5-12% off the Triton kernel at the full-layer points. Measured on the H200 (2026-12-01 fifth session,
two rounds, every output equal to the Triton kernel's bits): 2 stages 3.3-4.5% faster at 4 x 2,048 and 1 x 8,192
(393.9-396.8 against 412.4-414.5 us; 1,371-1,381 against 1,428-1,430), level at 16 x 512, 4% slower at 1 x 1,024;
3 stages 1-12% slower everywhere; cuDNN's SDPA still 12-13% ahead of both at the long points. Not built into the
engine (a kernel without the interpreter's CPU tests, for 3-4% of prefill attention's 7-8% of a mixed step).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import tempfile
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # Gluon has no interpreter: compile for real

import torch  # noqa: E402
import triton  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import (  # noqa: E402
    async_copy,
    fence_async_shared,
    warpgroup_mma,
    warpgroup_mma_wait,
)

GROUP, HEAD_DIM, KV_HEADS, BLOCK_SIZE, BLOCK_Q, BLOCK_N = 8, 64, 8, 16, 16, 64
POINTS = ((1, 1024), (4, 2048), (1, 8192), (16, 512))
LOG2E = 1.4426950408889634


@gluon.jit
def _block_ids(bt_ptr, row_offset, t, last_pos, keys, BLOCK_SIZE: gl.constexpr, BLOCK_N: gl.constexpr):
    """The cache block of each key of step t ([N], 0 past the tile's last query: those copies are masked)."""
    pos = t * BLOCK_N + keys
    return gl.load(bt_ptr + row_offset + pos // BLOCK_SIZE, mask=pos <= last_pos, other=0)


@gluon.jit
def _issue_step(k_ptr, v_ptr, k_slot, v_slot, blocks, t, last_pos, kv_head, keys, dims, BLOCK_SIZE: gl.constexpr,
                KV: gl.constexpr, D: gl.constexpr, BLOCK_N: gl.constexpr):
    """Step t's K and V [N, D] into one ring buffer by cp.async (16 bytes a thread a row part; keys past the tile's
    last query are zero-filled), as one commit group."""
    pos = t * BLOCK_N + keys  # [N]
    rows = blocks.to(gl.int64) * (BLOCK_SIZE * KV * D) + kv_head * (BLOCK_SIZE * D) + (pos % BLOCK_SIZE) * D
    offsets = rows[:, None] + dims[None, :]  # [N, D], head-major cache
    ok = (pos <= last_pos)[:, None]
    async_copy.async_copy_global_to_shared(k_slot, k_ptr + offsets, mask=ok)
    async_copy.async_copy_global_to_shared(v_slot, v_ptr + offsets, mask=ok)
    async_copy.commit_group()


@gluon.jit
def _gluon_prefill_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, cu_ptr, lens_ptr, sinks_ptr, out_ptr, stride_qt, stride_qh,
                          stride_ot, stride_oh, stride_bt, qk_scale, GROUP: gl.constexpr, D: gl.constexpr,
                          BLOCK_SIZE: gl.constexpr, KV: gl.constexpr, BLOCK_Q: gl.constexpr, BLOCK_N: gl.constexpr,
                          STAGES: gl.constexpr, num_warps: gl.constexpr):
    R: gl.constexpr = BLOCK_Q * GROUP  # rows: query i = r // GROUP, head g = r % GROUP
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BLOCK_N, 16])  # S [R, N] and O [R, D] (D == N)
    DOT_A: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    LOAD: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])  # 8 bf16 (16 bytes) a thread
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, D], gl.bfloat16)
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([R, D], gl.bfloat16)

    kv_head = gl.program_id(0)
    seq = gl.program_id(1)
    q_tile = gl.num_programs(2) - 1 - gl.program_id(2)  # the longest query tiles first
    q_start = gl.load(cu_ptr + seq)
    n = gl.load(cu_ptr + seq + 1) - q_start
    ctx = gl.load(lens_ptr + seq).to(gl.int32)
    q_base = ctx - n
    q_lead = q_base % BLOCK_Q
    if q_tile * BLOCK_Q - q_lead < n:
        # the tile's queries into shared memory (the QK^T wgmma's A operand)
        rq = gl.arange(0, R, layout=gl.SliceLayout(1, LOAD))
        dims = gl.arange(0, D, layout=gl.SliceLayout(0, LOAD))
        iq = q_tile * BLOCK_Q - q_lead + rq // GROUP
        q_rows = (q_start + iq).to(gl.int64) * stride_qt + (kv_head * GROUP + rq % GROUP) * stride_qh
        q = gl.load(q_ptr + q_rows[:, None] + dims[None, :], mask=((iq >= 0) & (iq < n))[:, None], other=0.0)
        q_smem = gl.allocate_shared_memory(gl.bfloat16, [R, D], q_layout, q)
        k_smem = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BLOCK_N, D], kv_layout)
        v_smem = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BLOCK_N, D], kv_layout)

        r = gl.arange(0, R, layout=gl.SliceLayout(1, mma))
        i = q_tile * BLOCK_Q - q_lead + r // GROUP
        head = kv_head * GROUP + r % GROUP
        row_ok = (i >= 0) & (i < n)
        q_pos = q_base + i  # [R]
        q_first = q_base - q_lead + q_tile * BLOCK_Q  # a multiple of BLOCK_Q
        last_pos = q_base + gl.minimum(q_tile * BLOCK_Q - q_lead + BLOCK_Q, n) - 1
        tiles = gl.cdiv(last_pos + 1, BLOCK_N)
        whole_to = gl.minimum((q_first + 1) // BLOCK_N, tiles)  # key steps every row sees whole
        key_cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma))
        keys = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, LOAD))
        row_offset = seq * stride_bt

        m = gl.load(sinks_ptr + head, mask=row_ok, other=0.0).to(gl.float32) * 1.4426950408889634
        l_sum = gl.full([R], 1.0, gl.float32, layout=gl.SliceLayout(1, mma))
        acc = gl.zeros([R, D], gl.float32, layout=mma)

        for j in gl.static_range(STAGES - 1):  # the first STAGES - 1 steps in flight
            blocks = _block_ids(bt_ptr, row_offset, j, last_pos, keys, BLOCK_SIZE, BLOCK_N)
            _issue_step(k_ptr, v_ptr, k_smem.index(j), v_smem.index(j), blocks, j, last_pos, kv_head, keys, dims,
                        BLOCK_SIZE, KV, D, BLOCK_N)
        blocks = _block_ids(bt_ptr, row_offset, STAGES - 1, last_pos, keys, BLOCK_SIZE, BLOCK_N)
        for t in range(0, tiles):
            async_copy.wait_group(STAGES - 2)  # this thread's copies of step t have landed
            fence_async_shared()
            gl.thread_barrier()  # everyone's, and every warp is past step t - 1 (its buffer is free)
            ahead = t + STAGES - 1
            _issue_step(k_ptr, v_ptr, k_smem.index(ahead % STAGES), v_smem.index(ahead % STAGES), blocks, ahead,
                        last_pos, kv_head, keys, dims, BLOCK_SIZE, KV, D, BLOCK_N)
            blocks = _block_ids(bt_ptr, row_offset, ahead + 1, last_pos, keys, BLOCK_SIZE, BLOCK_N)
            slot = t % STAGES
            s = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)),
                              gl.zeros([R, BLOCK_N], gl.float32, layout=mma), use_acc=False)  # [R, N]
            if t >= whole_to:  # the diagonal: causal mask
                k_pos = t * BLOCK_N + key_cols
                s = gl.where(k_pos[None, :] <= q_pos[:, None], s, float("-inf"))
            m_new = gl.maximum(m, gl.max(s, axis=1) * qk_scale)
            p = gl.exp2(gl.fma(s, qk_scale, -m_new[:, None]))
            alpha = gl.exp2(m - m_new)
            l_sum = l_sum * alpha + gl.sum(p, axis=1)
            acc = acc * alpha[:, None]
            acc = warpgroup_mma(gl.convert_layout(p.to(gl.bfloat16), DOT_A), v_smem.index(slot), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
            m = m_new
        async_copy.wait_group(0)  # the masked copies past the last step
        result = acc / l_sum[:, None]
        cols = gl.arange(0, D, layout=gl.SliceLayout(0, mma))
        out_rows = (q_start + i).to(gl.int64) * stride_ot + head * stride_oh
        gl.store(out_ptr + out_rows[:, None] + cols[None, :], result.to(gl.bfloat16), mask=row_ok[:, None])


def gluon_prefill(q, k_cache, v_cache, block_tables, cu_query_lens, context_lens, sinks, scale, max_query_len,
                  stages: int = 2, maxnreg: int | None = 128):
    """`paged_prefill_attention` for a full layer of gpt-oss's shapes (head-major cache of 16-position blocks)."""
    if stages < 2:
        raise ValueError(f"stages = {stages}: expected >= 2 (a step's copies are issued stages - 1 steps ahead)")
    out = torch.empty_like(q)
    batch = context_lens.shape[0]
    q_tiles = triton.cdiv(max_query_len + BLOCK_Q - 1, BLOCK_Q)
    _gluon_prefill_kernel[(KV_HEADS, batch, q_tiles)](
        q, k_cache, v_cache, block_tables, cu_query_lens, context_lens, sinks, out, q.stride(0), q.stride(1),
        out.stride(0), out.stride(1), block_tables.stride(0), float(scale) * LOG2E, GROUP=GROUP, D=HEAD_DIM,
        BLOCK_SIZE=BLOCK_SIZE, KV=KV_HEADS, BLOCK_Q=BLOCK_Q, BLOCK_N=BLOCK_N, STAGES=stages, num_warps=8,
        **({"maxnreg": maxnreg} if maxnreg else {}))
    return out


def compile_only(stages_list: list[int], maxnreg: int | None) -> None:
    """Compile for sm_90 without a GPU: registers, stack, and the SASS of the key loop."""
    import sys

    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from attention_sass_probe import key_loop_mix  # noqa: E402

    signature = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "bt_ptr": "*i32", "cu_ptr": "*i32",
                 "lens_ptr": "*i64", "sinks_ptr": "*bf16", "out_ptr": "*bf16", "stride_qt": "i32", "stride_qh": "i32",
                 "stride_ot": "i32", "stride_oh": "i32", "stride_bt": "i32", "qk_scale": "fp32"}
    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    for stages in stages_list:
        constexprs = dict(GROUP=GROUP, D=HEAD_DIM, BLOCK_SIZE=BLOCK_SIZE, KV=KV_HEADS, BLOCK_Q=BLOCK_Q,
                          BLOCK_N=BLOCK_N, STAGES=stages, num_warps=8)
        sig = dict(signature, **{name: "constexpr" for name in constexprs})
        options = {"num_warps": 8, **({"maxnreg": maxnreg} if maxnreg else {})}
        names = list(_gluon_prefill_kernel.arg_names)
        aligned = [name for name, kind in signature.items() if kind.startswith("*")] + ["stride_qt", "stride_ot"]
        attrs = {(names.index(name),): [["tt.divisibility", 16]] for name in aligned}  # as torch's tensors are
        kernel = triton.compile(GluonASTSource(_gluon_prefill_kernel, sig, constexprs, attrs),
                                target=GPUTarget("cuda", 90, 32), options=options)
        with tempfile.TemporaryDirectory() as tmp:
            cubin = Path(tmp) / "kernel.cubin"
            cubin.write_bytes(kernel.asm["cubin"])
            usage = subprocess.run([str(tools / "cuobjdump"), "-res-usage", str(cubin)], capture_output=True,
                                   text=True).stdout
            sass = subprocess.run([str(tools / "nvdisasm"), "-c", str(cubin)], capture_output=True, text=True).stdout
        if os.environ.get("GLUON_PREFILL_SASS"):  # a path prefix: write each stage count's whole SASS there
            Path(f"{os.environ['GLUON_PREFILL_SASS']}{stages}.sass").write_text(sass)
        loop = key_loop_mix(sass)
        resources = next((line.strip() for line in usage.splitlines() if "REG:" in line), "no resource usage")
        print(f"stages {stages}, maxnreg {maxnreg}: {resources}; key loop {sum(loop.values())} instructions a thread "
              f"(HGMMA {sum(v for k, v in loop.items() if 'HGMMA' in k)}, LDGSTS "
              f"{sum(v for k, v in loop.items() if 'LDGSTS' in k)}, DEPBAR {loop.get('DEPBAR.LE', 0)}, "
              f"STL {loop.get('STL', 0)}, LDL {loop.get('LDL', 0)})", flush=True)


def run_gpu(stages_list: list[int], maxnreg: int | None, reps: int, json_path: str | None) -> None:
    from quickmoe.bench.attention import _paged_set, _randn, time_in_graph
    from quickmoe.kernels.prefill_attention import paged_prefill_attention, paged_prefill_attention_ref

    device = torch.device("cuda")
    scale = HEAD_DIM**-0.5
    rows = []
    with torch.inference_mode():
        for batch, length in POINTS:
            g = torch.Generator(device).manual_seed(batch * 7 + length)
            paged = _paged_set(batch, length, 0, g, device, head_major=True)
            q = _randn(batch * length, GROUP * KV_HEADS, HEAD_DIM, g=g, device=device)
            cu = torch.arange(0, (batch + 1) * length, length, dtype=torch.int32, device=device)
            lens = torch.full((batch,), length, dtype=torch.long, device=device)
            args = (q, paged["k"], paged["v"], paged["tables"], cu, lens, paged["sinks"])
            triton_out = paged_prefill_attention(*args, 0, scale)
            row = {"point": [batch, length], "triton_us": time_in_graph(
                lambda i: paged_prefill_attention(*args, 0, scale), 1, reps) * 1e6}
            if (batch, length) == POINTS[0]:
                exact = paged_prefill_attention_ref(*args, 0, scale).float()
                row["triton_vs_reference"] = (triton_out.float() - exact).abs().max().item()
            for stages in stages_list:
                try:
                    out = gluon_prefill(*args, scale, length, stages, maxnreg)
                except Exception as exc:  # noqa: BLE001 (a probe: report what the compiler or the GPU refused)
                    row[f"gluon{stages}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    continue
                diff = (out.float() - triton_out.float()).abs().max().item()
                row[f"gluon{stages}_vs_triton"] = diff
                if (batch, length) == POINTS[0]:
                    row[f"gluon{stages}_vs_reference"] = (out.float() - exact).abs().max().item()
                if not math.isfinite(diff) or diff > 0.05:
                    print(f"stages {stages} at {batch} x {length}: max abs {diff} from the Triton kernel; not timed")
                    continue
                row[f"gluon{stages}_us"] = time_in_graph(
                    lambda i, stages=stages: gluon_prefill(*args, scale, length, stages, maxnreg), 1, reps) * 1e6
            q4 = _randn(batch, GROUP * KV_HEADS, length, HEAD_DIM, g=g, device=device)
            k4 = _randn(batch, KV_HEADS, length, HEAD_DIM, g=g, device=device)
            v4 = _randn(batch, KV_HEADS, length, HEAD_DIM, g=g, device=device)
            row["sdpa_us"] = time_in_graph(lambda i: torch.nn.functional.scaled_dot_product_attention(
                q4, k4, v4, scale=scale, is_causal=True, enable_gqa=True), 1, reps) * 1e6
            print(json.dumps(row), flush=True)
            rows.append(row)
            del paged, q
            torch.cuda.empty_cache()
    gluon_cols = " | ".join(f"Gluon {s} stages us (vs Triton)" for s in stages_list)
    print(f"| point | Triton us | {gluon_cols} | SDPA us |")
    for row in rows:
        cells = []
        for s in stages_list:
            us = row.get(f"gluon{s}_us")
            cells.append(f"{us:.1f} ({us / row['triton_us']:.3f})" if us else row.get(f"gluon{s}_error", "wrong")[:40])
        print(f"| {row['point'][0]} x {row['point'][1]} | {row['triton_us']:.1f} | " + " | ".join(cells)
              + f" | {row['sdpa_us']:.1f} |")
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compile-only", action="store_true", help="compile for sm_90 here and print the SASS mix")
    parser.add_argument("--stages", default="2,3", help="ring buffers of K and V (comma-separated)")
    parser.add_argument("--maxnreg", type=int, default=128, help="registers a thread (0: no cap)")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--json")
    args = parser.parse_args()
    stages = [int(s) for s in args.stages.split(",")]
    if args.compile_only:
        compile_only(stages, args.maxnreg or None)
    else:
        run_gpu(stages, args.maxnreg or None, args.reps, args.json)


if __name__ == "__main__":
    main()
