"""Triton's warm-cache compile path on the CPU (no GPU): what the first launch of a cached kernel costs before the
driver, for the mma-pair encode that TritonStart launches."""
import cProfile, os, pstats, sys, time
os.environ.pop("TRITON_INTERPRET", None)
t0 = time.perf_counter()
import triton
from triton.backends.compiler import GPUTarget
from quickmoe.kernels import mxfp4_mma_pairs
t1 = time.perf_counter()
src = triton.compiler.ASTSource(fn=mxfp4_mma_pairs._encode_kernel, signature={"words_ptr": "*i32", "n": "i32", "BLOCK": "constexpr"},
                                constexprs={"BLOCK": mxfp4_mma_pairs._BLOCK})
if len(sys.argv) > 1 and sys.argv[1] == "key":
    from quickmoe.executor.triton_key import use_cached_triton_key
    print("key cache:", use_cached_triton_key())
pr = cProfile.Profile(); t = time.perf_counter(); pr.enable()
k = triton.compile(src, target=GPUTarget("cuda", 90, 32))
pr.disable(); t2 = time.perf_counter()
print(f"imports {t1 - t0:.3f} s; triton.compile {t2 - t:.3f} s")
pstats.Stats(pr).sort_stats("cumulative").print_stats(18)
