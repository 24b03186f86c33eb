"""Decode attention's split kernel compiled for Hopper (sm_90) on a machine without a GPU: registers, spills, and the
SASS instruction mix of its key loop per 64-key step (issue 15: under Nsight Compute our kernel executes 1.4-2x the
instructions of cuDNN's at the same bytes, docs/benchmarks.md, 2026-11-27 third session; where do they go?).

PYTHONPATH=src python3 scripts/probes/attention_sass_probe.py [--block-n 64] [--warps 2] [--stages 4] [--no-rotary]
    [--splits 1] [--prefill] [--dump PREFIX]

Triton compiles `_decode_split_kernel` with gpt-oss's shapes (64 query heads, 8 KV heads of 64, the query group
padded to 16 rows, blocks of 16 positions, head-major cache, KV heads on the fastest grid axis) and the launch
config `decode_launch_config` gives above 512 (sequence, KV head) programs (64 keys, 2 warps, 4 stages) unless told
otherwise; `--prefill`: `_prefill_kernel` at its defaults instead (16 queries x the group of 8 = 128 rows, 64 keys a step,
4 warps, 3 stages: pass --warps 4 --stages 3), where the question is which tensor-core instructions it uses (prefill
reads at 0.39-0.42 of SDPA's rate). ptxas (from Triton's wheel) assembles it and nvdisasm lists the SASS. The key loop is the backward branch
whose body holds the tensor-core instructions; each opcode is counted per thread per step and per key. Nothing runs.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compile for real, not for the interpreter

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

from quickmoe.kernels import decode_attention  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/probes: sass_probe's disassembly
from sass_probe import OPCODE, disassemble  # noqa: E402

SIGNATURE = {"q_ptr": "*bf16", "k_cache_ptr": "*bf16", "v_cache_ptr": "*bf16", "block_tables_ptr": "*i32",
             "context_lens_ptr": "*i64", "sinks_ptr": "*bf16", "out_ptr": "*bf16", "part_acc_ptr": "*fp32",
             "part_ml_ptr": "*fp32", "pos_ptr": "*i64", "cos_sin_ptr": "*fp32", "slot_ptr": "*i64",
             "stride_qb": "i32", "stride_qh": "i32", "stride_ob": "i32", "stride_oh": "i32", "stride_bt": "i32",
             "stride_cs": "i32", "window": "i32", "qk_scale": "fp32", "q_w_ptr": "*fp32", "k_w_ptr": "*fp32",
             "norm_eps": "fp32"}
ALIGNED = [name for name, kind in SIGNATURE.items() if kind.startswith("*")] + ["stride_qb", "stride_ob", "stride_bt"]


def compile_split_kernel(block_n: int, warps: int, stages: int, rotary: bool, splits: int, head_dim: int = 64,
                         group: int = 8, qk_norm: bool = False):
    kernel = decode_attention._decode_split_kernel
    constexprs = dict(GROUP=group, GROUP_PAD=max(16, group), D=head_dim, D_POW2=head_dim, BLOCK_SIZE=16, KV=8,
                      HEAD_MAJOR=True, BLOCK_N=block_n,
                      SPLITS=splits, FP32_DOT=False, ROTARY=rotary, KV_FASTEST=True, QK_NORM=qk_norm, PDL=True)
    names = list(kernel.arg_names)
    signature = dict(SIGNATURE, **{name: "constexpr" for name in constexprs})
    attrs = {(names.index(name),): [["tt.divisibility", 16]] for name in ALIGNED}
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": warps, "num_stages": stages})


PREFILL_SIGNATURE = {"q_ptr": "*bf16", "k_cache_ptr": "*bf16", "v_cache_ptr": "*bf16", "block_tables_ptr": "*i32",
                     "cu_q_ptr": "*i32", "context_lens_ptr": "*i64", "sinks_ptr": "*bf16", "out_ptr": "*bf16",
                     "stride_qt": "i32", "stride_qh": "i32", "stride_ot": "i32", "stride_oh": "i32", "stride_bt": "i32",
                     "window": "i32", "qk_scale": "fp32"}


def compile_prefill_kernel(block_n: int, warps: int, stages: int, block_q: int = 16, maxnreg: int | None = None,
                           head_dim: int = 64, group: int = 8):
    from quickmoe.kernels import prefill_attention

    kernel = prefill_attention._prefill_kernel
    block_size = int(os.environ.get("PROBE_BLOCK_SIZE", 16))  # positions a cache block (the engine's 16)
    constexprs = dict(GROUP=group, GROUP_POW2=group, D=head_dim, D_POW2=head_dim, BLOCK_SIZE=block_size, KV=8,
                      HEAD_MAJOR=True, BLOCK_Q=block_q, BLOCK_N=block_n, FP32_DOT=False)
    if "INT64_OFFSETS" in kernel.arg_names:
        constexprs["INT64_OFFSETS"] = False
    if "LONGEST_FIRST" in kernel.arg_names:
        constexprs["LONGEST_FIRST"] = True
    if "DIAGONAL_IN_LOOP" in kernel.arg_names:
        constexprs["DIAGONAL_IN_LOOP"] = head_dim <= 64
    names = list(kernel.arg_names)
    signature = dict(PREFILL_SIGNATURE, **{name: "constexpr" for name in constexprs})
    aligned = [n for n, kind in PREFILL_SIGNATURE.items() if kind.startswith("*")] + ["stride_qt", "stride_ot"]
    attrs = {(names.index(name),): [["tt.divisibility", 16]] for name in aligned}
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    options = {"num_warps": warps, "num_stages": stages}
    if maxnreg:
        options["maxnreg"] = maxnreg
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)


def tensor_core_loops(sass: str) -> list[tuple[str, collections.Counter]]:
    """(label, opcode counts) of every loop (a label and a later branch back to it) that holds tensor-core work."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"^(\.L_x_\d+):", line))}
    loops = []
    for name, start in labels.items():
        ends = [i for i in range(start + 1, len(lines)) if f"`({name})" in lines[i] and "BRA" in lines[i]]
        if ends:
            mix = collections.Counter(m.group(2) for line in lines[start:ends[-1] + 1] if (m := OPCODE.match(line)))
            if any("MMA" in op for op in mix):
                loops.append((name, mix))
    return loops


def key_loop_mix(sass: str) -> collections.Counter:
    """Opcode counts of the largest loop that holds tensor-core work."""
    return max((mix for _, mix in tensor_core_loops(sass)), key=lambda mix: sum(mix.values()),
               default=collections.Counter())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--block-n", type=int, default=64)
    parser.add_argument("--warps", type=int, default=2)
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--splits", type=int, default=1)
    parser.add_argument("--no-rotary", action="store_true", help="the kernel without RoPE and the KV write")
    parser.add_argument("--prefill", action="store_true", help="the prefill kernel instead (see above)")
    parser.add_argument("--block-q", type=int, default=16, help="--prefill: queries a program")
    parser.add_argument("--maxnreg", type=int, help="--prefill: the registers a thread may take (ptxas limit)")
    parser.add_argument("--head-dim", type=int, default=64, help="head dim (gpt-oss 64, Qwen3 128)")
    parser.add_argument("--group", type=int, default=8, help="query heads a KV head (a power of two)")
    parser.add_argument("--qk-norm", action="store_true", help="Qwen3's q/k head RMSNorm in the RoPE prologue")
    parser.add_argument("--top", type=int, default=24)
    parser.add_argument("--dump", metavar="PREFIX", help="write PREFIX.ttgir and PREFIX.sass (the whole kernel)")
    args = parser.parse_args()
    if args.prefill:
        compiled = compile_prefill_kernel(args.block_n, args.warps, args.stages, args.block_q, args.maxnreg,
                                          args.head_dim, args.group)
    else:
        compiled = compile_split_kernel(args.block_n, args.warps, args.stages, not args.no_rotary, args.splits,
                                        args.head_dim, args.group, args.qk_norm)
    usage, sass = disassemble(compiled)
    print(usage)
    buffers = collections.Counter(re.findall(r"local_alloc : \(\) -> !ttg\.memdesc<([0-9x]+)", compiled.asm["ttgir"]))
    print("pipeline buffers (shape: allocations; the leading number is how many steps a load runs ahead):",
          ", ".join(f"{shape.rstrip('x')}: {n}" for shape, n in sorted(buffers.items())) or "none")
    if args.dump:
        Path(f"{args.dump}.ttgir").write_text(compiled.asm["ttgir"])
        Path(f"{args.dump}.sass").write_text(sass)
    mix = key_loop_mix(sass)
    total = sum(mix.values())
    threads = 32 * args.warps
    print(f"key loop: {total} instructions per thread per step of {args.block_n} keys ({args.warps} warps): "
          f"{total * threads / args.block_n:.1f} per key, {total * args.warps / args.block_n:.2f} warp-instructions "
          "per key")
    for opcode, count in mix.most_common(args.top):
        print(f"  {count:5d}  {count * args.warps / args.block_n:6.3f} warp-instr/key  {opcode}")
    print("every loop with tensor-core work (prefill: masked steps at a window's start, whole steps and the diagonal):")
    for label, loop in tensor_core_loops(sass):
        print(f"  {label}: {sum(loop.values())} instructions a thread a pass, {loop.get('STL', 0)} STL, "
              f"{loop.get('LDL', 0)} LDL, {loop.get('DEPBAR.LE', 0)} DEPBAR.LE")


if __name__ == "__main__":
    main()
