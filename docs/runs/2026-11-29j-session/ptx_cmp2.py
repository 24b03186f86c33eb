"""GEMM 1 (and GEMM 2) PTX for sm_90 on the CPU, from whichever moe_gemm is on the path; constexprs the kernel does
not take are dropped, SCALES_AHEAD (call 6's tree) added by that tree's rule."""
import sys
sys.path.insert(0, "/work/main/scripts/probes")
import sass_probe as sp
from quickmoe.kernels import moe_gemm
orig = sp.triton.compiler.ASTSource
bm, warps, swap, out, fmt = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4], sys.argv[5]
def filtered(fn, signature, constexprs, attrs):
    names = set(fn.arg_names)
    if "SCALES_AHEAD" in names:
        constexprs = dict(constexprs, SCALES_AHEAD=fmt == "mxfp4" or (fmt == "nvfp4" and not (swap and warps < 8)))
        signature = dict(signature, SCALES_AHEAD="constexpr")
        # the call-6 tree's kernel has one more argument before SWAP_AB: indices of the aligned pointers shift
        order = list(fn.arg_names)
        attrs = {(order.index(n),): [["tt.divisibility", 16]] for n in sp.ALIGNED}
    constexprs = dict(constexprs, SUB_TILES=True)
    return orig(fn=fn, signature={k: v for k, v in signature.items() if k in names},
                constexprs={k: v for k, v in constexprs.items() if k in names}, attrs=attrs)
sp.triton.compiler.ASTSource = filtered
k = sp.compile_gemm1(64, 64, warps, 3, block_m=bm, swap_ab=swap, fmt=fmt, one_dot=True)
open(out, "w").write(k.asm["ptx"])
