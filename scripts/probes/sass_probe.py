"""The MoE GEMM 1 kernel compiled for Hopper (sm_90) on a machine without a GPU: registers, spills, shared memory,
and the SASS instruction mix of its K loop per MXFP4 weight element (what bounds the decode-sized MoE).

PYTHONPATH=src python3 scripts/probes/sass_probe.py [--block-m 16] [--block-n 32] [--block-k 256] [--warps 4]
    [--stages 3] [--swap-ab] [--one-dot] [--format mxfp4|fp8|nvfp4] [--fp8-scale-rows 64] [--maxnreg N]

`--format fp8`: Qwen3-30B-A3B's FP8 block-scaled experts instead (FP8 x FP8 dots, each 128-column step's product
scaled by activation scale x weight scale and added in float32): which tensor-core instructions the loop uses, its
registers and spills, and the CUDA-core work of the scaling. `--format nvfp4`: Mixtral-8x7B's NVFP4 experts (H 4096,
I 14336, E4M3 scales per 16 values, bf16 activations, the per-row global scale after the loop, SiLU).

Triton compiles the kernel with the same specialization its JIT gives the real launch (pointers and the activation
stride 16-byte aligned; gpt-oss-20b shapes H = I = 2880, group 64, BLOCK_M 16 unless given, bf16 activations), ptxas
(shipped in Triton's wheel) assembles it, nvdisasm lists the SASS; the loop is the code between the K loop's label and
its backward branch. Instructions per weight element = loop instructions x threads / (2 x BLOCK_N x BLOCK_K). Nothing
runs: it reads what the compiler made (METHOD.md: "read what costs no device time"). The weights are loaded by
pointers (W_TMA off): a tile launched with `weight_tma` compiles to other register counts (Qwen3's FP8 64 x 64 tile:
176 here, 168 as launched on the H200, 2026-12-04), which `moe_config_sweep.py --registers` prints from the GPU.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import tempfile
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compile for real, not for the interpreter

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

from quickmoe.kernels import moe_gemm  # noqa: E402

SIGNATURE = {"x_ptr": "*bf16", "xs_ptr": "*bf16", "w_ptr": "*u8", "s_ptr": "*u8", "bias_ptr": "*bf16",
             "row_scale_ptr": "*u8", "out_ptr": "*bf16", "partial_ptr": "*fp32", "counter_ptr": "*i32",
             "sorted_ids_ptr": "*i32", "block_expert_ptr": "*i32",
             "num_padded_ptr": "*i32", "top_k": "i32", "num_assignments": "i32", "num_m": "i32", "num_n": "i32",
             "group_m": "i32", "stride_x": "i32", "stride_xs": "i32", "limit": "fp32", "alpha": "fp32"}
GROUP = 64  # the layouts' gate/up interleave (bench.moe_experts.GROUP)
ALIGNED = [name for name, kind in SIGNATURE.items() if kind.startswith("*")] + ["stride_x"]


FP8_TYPES = {"x_ptr": "*fp8e4nv", "xs_ptr": "*fp32", "w_ptr": "*fp8e4nv", "s_ptr": "*fp32"}
NVFP4_TYPES = {"row_scale_ptr": "*fp32"}


def compile_gemm1(block_n: int, block_k: int, warps: int, stages: int, block_m: int = 16, swap_ab: bool = False,
                  maxnreg: int | None = None, fmt: str = "mxfp4", one_dot: bool = False,
                  fp8_scale_rows: int = 64) -> triton.compiler.CompiledKernel:
    """GEMM 1 for sm_90: gpt-oss-20b's MXFP4 experts (H = I = 2880, bias, gpt-oss SwiGLU), or fmt "fp8":
    Qwen3-30B-A3B's FP8 block-scaled experts (H 2048, I 768, FP8 activations with float32 per-128 scales, SiLU),
    one weight scale per fp8_scale_rows kernel rows (64: the layout's, for 128 x 128 blocks; 1: one per row)."""
    kernel = moe_gemm._gemm1_swiglu_kernel
    fp8, nvfp4 = fmt == "fp8", fmt == "nvfp4"
    block_n = min(block_n, GROUP)  # what moe_gemm1_swiglu launches (a program's columns lie in one gate/up group)
    mxfp4 = not (fp8 or nvfp4)
    constexprs = dict(H=2048 if fp8 else 4096 if nvfp4 else 2880, I=768 if fp8 else 14336 if nvfp4 else 2880,
                      MXFP4=mxfp4, NVFP4=nvfp4, FP8_SCALE_ROWS=fp8_scale_rows if fp8 else 0,
                      A_MXFP8=False, GROUP=GROUP, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=128 if fp8 else block_k,
                      PRECISION="tf32", DOT_DTYPE=tl.float8e4nv if fp8 else tl.bfloat16, PTX=True, MXFP4_PTX=mxfp4,
                      SWAP_AB=swap_ab, HAS_BIAS=mxfp4, SILU=not mxfp4, ROW_SCALE=nvfp4, SUB_TILES=False, W_TMA=False,
                      SPLIT_K=1, PDL=True)
    constexprs["K_PART"] = constexprs["H"]  # K in one part
    if "ONE_DOT" in kernel.arg_names:
        constexprs["ONE_DOT"] = one_dot
    names = list(kernel.arg_names)
    signature = dict(SIGNATURE, **(FP8_TYPES if fp8 else NVFP4_TYPES if nvfp4 else {}),
                     **{name: "constexpr" for name in constexprs})
    attrs = {(names.index(name),): [["tt.divisibility", 16]] for name in ALIGNED}
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages,
                                                                       **({"maxnreg": maxnreg} if maxnreg else {})})


OPCODE = re.compile(r"\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(\.[A-Z0-9_]+)*)")  # an SASS line's opcode


def disassemble(compiled) -> tuple[str, str]:
    """A compiled Triton kernel's resource usage line (cuobjdump) and its SASS (nvdisasm), by the tools in
    Triton's wheel."""
    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run([str(tools / "cuobjdump"), "-res-usage", str(cubin)], capture_output=True, text=True)
        sass = subprocess.run([str(tools / "nvdisasm"), "-c", str(cubin)], capture_output=True, text=True).stdout
    return next((line.strip() for line in usage.stdout.splitlines() if "REG:" in line), "no resource usage"), sass


def loop_mix(sass: str) -> collections.Counter:
    """Opcode counts between the first loop label and the branch back to it."""
    lines = sass.splitlines()
    label = next(i for i, line in enumerate(lines) if re.match(r"^\.L_x_\d+:", line))
    name = lines[label].rstrip(":")
    end = next(i for i in range(label, len(lines)) if f"`({name})" in lines[i])
    mix: collections.Counter = collections.Counter()
    for line in lines[label:end + 1]:
        match = OPCODE.match(line)
        if match:
            mix[match.group(2)] += 1
    return mix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--block-m", type=int, default=16)
    parser.add_argument("--block-n", type=int, default=32)
    parser.add_argument("--block-k", type=int, default=256)
    parser.add_argument("--warps", type=int, default=4)
    parser.add_argument("--stages", type=int, default=3)
    parser.add_argument("--swap-ab", action="store_true", help="the transposed orientation (weights the left operand)")
    parser.add_argument("--maxnreg", type=int, default=None, help="cap the registers per thread (ptxas)")
    parser.add_argument("--format", choices=("mxfp4", "fp8", "nvfp4"), default="mxfp4",
                        help="fp8: Qwen3-30B-A3B's FP8 block-scaled experts (BLOCK_K is then 128, one scale group); "
                             "nvfp4: Mixtral-8x7B's NVFP4 experts")
    parser.add_argument("--one-dot", action="store_true", help="gate_up_one_dot: gate and up rows in one dot")
    parser.add_argument("--fp8-scale-rows", type=int, default=64,
                        help="fp8: kernel rows per weight scale (64: the layout's for 128 x 128 blocks; 1: per row)")
    args = parser.parse_args()
    if args.block_n > GROUP:  # moe_gemm1_swiglu launches min(block_n, group) columns a program, as here
        print(f"block_n {args.block_n} -> {GROUP}: GEMM 1 takes at most the gate/up group's columns a program")
        args.block_n = GROUP
    compiled = compile_gemm1(args.block_n, args.block_k, args.warps, args.stages, args.block_m, args.swap_ab,
                             args.maxnreg, args.format, args.one_dot, args.fp8_scale_rows)
    if args.format == "fp8":
        args.block_k = 128
    usage, sass = disassemble(compiled)
    print(usage)
    mix = loop_mix(sass)
    total = sum(mix.values())
    per_value = total * 32 * args.warps / (2 * args.block_n * args.block_k)
    print(f"K loop: {total} instructions per thread per step of {args.block_k} columns x {2 * args.block_n} rows: "
          f"{per_value:.2f} per weight element")
    mma = {op: n for op, n in mix.items() if "MMA" in op}
    print("tensor-core instructions in the loop:", mma or "none")
    for opcode, count in mix.most_common(16):
        print(f"  {count:5d}  {count * 32 * args.warps / (2 * args.block_n * args.block_k):5.2f}/element  {opcode}")


if __name__ == "__main__":
    main()
