"""The FP8 GEMVs (`kernels/moe_fp8_gemv.py`'s two, `kernels/fp8_gemv.py`'s dense one) compiled for Hopper (sm_90)
on a machine without a GPU: registers, barriers, the global loads and where they sit in the SASS, the instruction
count.

PYTHONPATH=src python3 scripts/probes/fp8_gemv_sass_probe.py [--gemv 1|2|dense] [--rows 8] [--warps 2] [--groups 4]
    [--k 2048]

Qwen3-30B-A3B's shapes (MoE: hidden 2048, intermediate 768, gate/up groups of 64, one weight scale per 64 rows in
GEMM 1 and per 128 in GEMM 2; dense: K = --k, scale blocks of 128 rows), the pointers 16-byte aligned as the
launch's are. Nothing runs: it reads what the compiler made (ptxas and nvdisasm from Triton's wheel,
`sass_probe.disassemble`). The GEMV's loads are plain (Triton pipelines only loads that feed a dot), so what matters
is whether barriers or branches sit between a step's loads and the next step's: the line numbers of the LDG
instructions show how far ahead they are issued.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compile for real, not for the interpreter
sys.path.insert(0, str(Path(__file__).resolve().parent))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

from quickmoe.kernels import fp8_gemv, moe_fp8_gemv  # noqa: E402
from sass_probe import OPCODE, disassemble  # noqa: E402

SIGNATURES = {
    "1": {"x_ptr": "*fp8e4nv", "xs_ptr": "*fp32", "ids_ptr": "*i32", "w_ptr": "*fp8e4nv", "s_ptr": "*fp32",
        "bias_ptr": "*fp32", "out_ptr": "*bf16", "top_k": "i32", "limit": "fp32", "alpha": "fp32"},
    "2": {"x_ptr": "*fp8e4nv", "xs_ptr": "*fp32", "ids_ptr": "*i32", "w_ptr": "*fp8e4nv", "s_ptr": "*fp32",
          "bias_ptr": "*fp32", "route_w_ptr": "*bf16", "out_ptr": "*bf16"},
    "dense": {"x_ptr": "*fp8e4nv", "xs_ptr": "*fp32", "w_ptr": "*fp8e4nv", "ws_ptr": "*fp32", "bias_ptr": "*bf16",
              "out_ptr": "*bf16", "partial_ptr": "*fp32", "counter_ptr": "*i32", "N": "i32", "stride_xm": "i32",
              "stride_xsm": "i32", "stride_xsg": "i32", "stride_wn": "i32", "stride_wsn": "i32", "stride_wsg": "i32",
              "stride_om": "i32"},
}


DIVISIBLE_INTS = ("N", "stride_xm", "stride_xsm", "stride_wn", "stride_wsn", "stride_om")


def compile_gemv(which, rows: int, warps: int, groups: int, k: int, preload: int = 1):
    """`groups`: the 128-column groups a step (the launch's C); `preload`: the dense GEMV's K steps of weights
    loaded before its PDL wait."""
    if which == "1":
        kernel = moe_fp8_gemv._moe_gemv1_kernel
        constexprs = dict(H=2048, I=768, GROUP=64, SCALE_ROWS=64, ROWS=rows, C=groups, HAS_BIAS=False, SILU=True,
                          PDL=True)
    elif which == "2":
        kernel = moe_fp8_gemv._moe_gemv2_kernel
        constexprs = dict(H=2048, I=768, SCALE_ROWS=128, ROWS=rows, C=groups, HAS_BIAS=False, PDL=True)
    else:
        kernel = fp8_gemv._fp8_gemv_kernel
        constexprs = dict(K_PER_SPLIT=k, BN_SCALE=128, HAS_BIAS=False, ROWS=rows, C=groups, SPLIT_K=1,
                          PRELOAD=min(preload, k // (groups * 128)), PDL=True)
    signature = dict(SIGNATURES[which], **{name: "constexpr" for name in constexprs})
    names = list(kernel.arg_names)
    # as the launch specializes them: pointers 16-byte aligned, and the dense GEMV's sizes and row strides
    # multiples of 16 (Qwen3's N 5120 / 2048, K 2048 / 4096, K / 128 = 16 / 32 scale groups)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n, kind in signature.items()
             if kind.startswith("*") or n in DIVISIBLE_INTS}
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gemv", choices=("1", "2", "dense"), default="1")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--warps", type=int, default=2)
    parser.add_argument("--groups", type=int, default=4, help="128-column groups a step (the launch's C)")
    parser.add_argument("--k", type=int, default=2048, help="the dense GEMV's K (one part)")
    parser.add_argument("--preload", type=int, default=4, help="the dense GEMV's K steps loaded before the wait")
    parser.add_argument("--dump", help="write the SASS to this file")
    args = parser.parse_args()
    compiled = compile_gemv(args.gemv, args.rows, args.warps, args.groups, args.k, args.preload)
    usage, sass = disassemble(compiled)
    lines = sass.splitlines()
    opcodes = [(i, m.group(2)) for i, m in enumerate(map(OPCODE.match, lines)) if m]
    mix = collections.Counter(op for _, op in opcodes)
    print(f"GEMV {args.gemv}, {args.rows} rows, {args.warps} warps, {args.groups} groups a step: {usage}")
    print(f"{len(opcodes)} instructions; barriers (BAR): {sum(n for op, n in mix.items() if op.startswith('BAR'))}; "
          f"calls: {sum(n for op, n in mix.items() if op.startswith('CALL'))}")
    print("most used:", ", ".join(f"{op} {n}" for op, n in mix.most_common(12)))
    print("global loads at instruction:", " ".join(str(k) for k, (_, op) in enumerate(opcodes) if op.startswith("LDG")))
    print("PDL wait (ACQBULK) at instruction:",
          " ".join(str(k) for k, (_, op) in enumerate(opcodes) if op.startswith("ACQBULK")) or "none")
    if args.dump:
        Path(args.dump).write_text(sass)


if __name__ == "__main__":
    main()
