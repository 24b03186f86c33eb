"""dense_gemm's part length (PART_TARGET) on o_proj (4096 -> 2880) and QKV (2880 -> 5120): us a call in CUDA graphs
(weights rotating over 4 sets) for a few configs per row count, per PART_TARGET, in turns; bits checked across the
configs of one PART_TARGET."""
import sys
import torch
import torch.nn.functional as F
from quickmoe.bench.attention import time_in_graph
from quickmoe.kernels import dense_gemm as dg
from quickmoe.kernels.dense_gemm import DenseConfig

SETS = 4
CFGS = {1: [DenseConfig(16, 64, 128, 4, 4, swap=True, split=True), DenseConfig(16, 64, 64, 4, 4, swap=True, split=True)],
        16: [DenseConfig(16, 64, 128, 4, 4, swap=True, split=True)],
        64: [DenseConfig(32, 64, 128, 4, 3, swap=True, split=True)],
        128: [DenseConfig(64, 64, 128, 4, 4, swap=True)],
        256: [DenseConfig(64, 64, 128, 4, 3, swap=True)]}
g = torch.Generator().manual_seed(0)
rows_all = sorted(CFGS)
for name, (k, n) in {"o_proj": (4096, 2880)}.items():
    ws = [(torch.randn(n, k, generator=g) / k ** 0.5).cuda().bfloat16() for _ in range(SETS)]
    bs = [torch.randn(n, generator=g).cuda().bfloat16() for _ in range(SETS)]
    xb = torch.randn(256, k, generator=g).cuda().bfloat16()
    for target in (1024, 512, 256, 1024, 512, 256):
        dg.PART_TARGET = target
        parts = dg.dense_k_parts(k)
        ref = dg.dense_gemm(xb, ws[0], bs[0], DenseConfig(128, 128, 64, 8, 3))
        bad = sum(not torch.equal(dg.dense_gemm(xb[:r], ws[0], bs[0], c), ref[:r]) for r in rows_all for c in CFGS[r])
        line = [f"{name} target {target} parts {parts} bits-unlike {bad}:"]
        for r in rows_all:
            xs = [torch.randn(r, k, generator=g).cuda().bfloat16() for _ in range(SETS)]
            ts = [time_in_graph(lambda i, c=c, xs=xs: dg.dense_gemm(xs[i], ws[i], bs[i], c), SETS, 32) * 1e6 for c in CFGS[r]]
            line.append(f"r{r} " + "/".join(f"{t:.2f}" for t in ts))
        print(" ".join(line), flush=True)
    for r in rows_all:
        xs = [torch.randn(r, k, generator=g).cuda().bfloat16() for _ in range(SETS)]
        print(f"{name} cuBLAS r{r} {time_in_graph(lambda i, xs=xs: F.linear(xs[i], ws[i], bs[i]), SETS, 32) * 1e6:.2f}", flush=True)
