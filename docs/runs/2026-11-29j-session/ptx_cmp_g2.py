"""GEMM 2 PTX for sm_90 on the CPU (NVFP4, Mixtral's down shape) from whichever moe_gemm is on the path."""
import os, sys
os.environ.pop("TRITON_INTERPRET", None)
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from quickmoe.kernels import moe_gemm
bm, warps, swap, out, sub = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4], sys.argv[5] == "1"
kernel = moe_gemm._gemm2_kernel
ptrs = {"x_ptr": "*bf16", "xs_ptr": "*bf16", "w_ptr": "*u8", "s_ptr": "*u8", "bias_ptr": "*bf16",
        "row_scale_ptr": "*fp32", "route_w_ptr": "*fp32", "out_ptr": "*bf16", "partial_ptr": "*fp32",
        "counter_ptr": "*i32", "sorted_ids_ptr": "*i32", "block_expert_ptr": "*i32", "num_padded_ptr": "*i32"}
ints = {n: "i32" for n in ("num_assignments", "num_m", "num_n", "group_m", "stride_x", "stride_xs")}
c = dict(H=4096, I=14336, MXFP4=False, NVFP4=True, FP8_SCALE_ROWS=0, A_MXFP8=False, BLOCK_M=bm, BLOCK_N=128,
         BLOCK_K=64, PRECISION="tf32", DOT_DTYPE=tl.bfloat16, PTX=True, MXFP4_PTX=False,
         SCALES_AHEAD=not (swap and warps < 8), SWAP_AB=swap, HAS_BIAS=False, ROW_SCALE=True, SUB_TILES=sub,
         W_TMA=False, SPLIT_K=1, K_PART=14336, PDL=True)
names = list(kernel.arg_names)
c = {k: v for k, v in c.items() if k in names}
sig = dict(ptrs, **ints, **{k: "constexpr" for k in c})
attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in list(ptrs) + ["stride_x"]}
src = triton.compiler.ASTSource(fn=kernel, signature=sig, constexprs=c, attrs=attrs)
k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": 3})
open(out, "w").write(k.asm["ptx"])
