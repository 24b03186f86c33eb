"""One MoE GEMM tile config forced, run many times: NaN / inf counts, where they fall, same inputs repeated.
PYTHONPATH=src python3 .ab/forced_nan.py --shape qwen3-30b-a3b --format nvfp4 --tokens 8192 --runs 10 \
    --config 128,64,64,4,3,1 [--same 5] [--gemms 1,2]"""
import argparse, dataclasses, sys, time
from pathlib import Path
import torch
sys.path.insert(0, str(Path.cwd() / "scripts"))
import tune_moe
from quickmoe.bench.moe_experts import SHAPES, make_experts
from quickmoe.kernels import moe_configs
from quickmoe.kernels.moe_align import moe_align

p = argparse.ArgumentParser()
p.add_argument("--shape", default="qwen3-30b-a3b"); p.add_argument("--format", default="nvfp4")
p.add_argument("--tokens", type=int, default=8192); p.add_argument("--runs", type=int, default=10)
p.add_argument("--config", default="128,64,64,4,3,1"); p.add_argument("--same", type=int, default=1)
p.add_argument("--gemms", default="1,2"); p.add_argument("--no-ref", action="store_true")
a = p.parse_args()
bm, bn, bk, w, s, swap = (int(v) for v in a.config.split(","))
spec = SHAPES[a.shape]
ex = make_experts(spec, a.format, torch.device("cuda"), torch.Generator().manual_seed(0))
base = moe_configs.MoEKernelConfig(block_m=bm, block_n=bn, block_k=bk, num_warps=w, num_stages=s, swap_ab=bool(swap),
                                   group_m=8)
cfg = {1: base, 2: base}
fb = moe_configs._fallback(a.tokens)
gemms = [int(g) for g in a.gemms.split(",")]
print(f"{a.shape} {a.format} T={a.tokens} config {base}", flush=True)
t0 = time.time(); bad = {g: 0 for g in gemms}; total = {g: 0 for g in gemms}
for run in range(a.runs):
    inputs = tune_moe.make_inputs(ex, spec.top_k, a.tokens, torch.Generator().manual_seed(1000 + run))
    ids = [i for _, i in inputs[1]]
    if not a.no_ref:
        ref = tune_moe.gemm_runs(ex, spec.top_k, inputs, [moe_align(i, spec.experts, fb.block_m) for i in ids])
    runs = tune_moe.gemm_runs(ex, spec.top_k, inputs, [moe_align(i, spec.experts, bm) for i in ids])
    for g in gemms:
        want = None if a.no_ref else ref[g - 1](0, fb)
        for rep in range(a.same):
            got = runs[g - 1](0, cfg[g]); torch.cuda.synchronize(); total[g] += 1
            nf = ~torch.isfinite(got)
            if nf.any():
                bad[g] += 1
                r, c = nf.nonzero(as_tuple=True)
                print(f"  run {run} rep {rep} GEMM {g}: {int(nf.sum())} bad of {got.shape}; rows {sorted(set(r.tolist()))[:12]}"
                      f" ({len(set(r.tolist()))} rows) cols {sorted(set(c.tolist()))[:12]} ({len(set(c.tolist()))} cols)", flush=True)
            elif want is not None and rep == 0:
                err = tune_moe.rel_err(got, want)
                if err > 1e-3: print(f"  run {run} GEMM {g}: finite but rel err {err:.3g}", flush=True)
for g in gemms:
    print(f"GEMM {g}: {bad[g]} of {total[g]} calls with NaN / inf ({time.time() - t0:.0f} s)")
