import sys
sys.path.insert(0, "/work/main/scripts/probes")
import sass_probe as sp
bm, warps, swap, fmt, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4], sys.argv[5]
k = sp.compile_gemm1(64, 64, warps, 3, block_m=bm, swap_ab=swap, fmt=fmt, one_dot=True)
usage, sass = sp.disassemble(k)
open(out, "w").write(usage + "\n" + sass)
print(usage)
