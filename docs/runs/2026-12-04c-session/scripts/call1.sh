#!/bin/bash
# Call 1 (2026-12-04 third session): FP8 MoE GEMMs at prefill sizes under a register cap (issue 18).
# Reading: Qwen3-30B-A3B's FP8 GEMM 1 tile at T = 8,192 (64 x 64 + 64, 4 warps, 3 stages of 24 KB) compiles to
# 176 registers (sass_probe, sm_90, development machine): 176 x 128 threads -> 2 programs an SM by registers, where
# shared memory holds 3. A cap of 168 (16 B of stack in the probe's compile) gives 3.
# Prediction: GEMM 1 and GEMM 2 at T = 8,192 -5 to -15% alone; the layer (bench moe) 1,078 -> 960-1,030 us
# (44.8% -> 47-50% of the FP8 rate); T = 2,048 a smaller gain; nothing at decode sizes (no key below 1,024 capped).
# 1. moe_config_sweep --tuned-only at caps 0 / 168 / 160 (+ registers and programs an SM of every compiled kernel);
# 2. bench moe FP8 Qwen3 on .ab/main (HEAD) and .ab/cap (keys 1,024, 2,048, 8,192 of both GEMMs capped at 168), in
#    turns, two rounds.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
MAIN=/tmp/site:$PWD/.ab/main/src
CAP=/tmp/site:$PWD/.ab/cap/src
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
for t in 8192 2048; do
  PYTHONPATH=$MAIN:$PWD/scripts timeout 200 python3 scripts/probes/moe_config_sweep.py --shape qwen3-30b-a3b \
    --format fp8 --tokens $t --tuned-only --maxnreg 0,168,160 --registers --json $OUT/sweep_q_$t.json \
    > $OUT/sweep_q_$t.log 2>&1
  echo "sweep qwen3 T=$t rc $? ($SECONDS s)"
done
PYTHONPATH=$MAIN:$PWD/scripts timeout 150 python3 scripts/probes/moe_config_sweep.py --shape mixtral-8x7b \
  --format fp8 --tokens 8192 --tuned-only --maxnreg 0,168 --registers --json $OUT/sweep_m_8192.json \
  > $OUT/sweep_m_8192.log 2>&1
echo "sweep mixtral T=8192 rc $? ($SECONDS s)"
for round in 1 2; do
  for tree in cap main; do
    P=$MAIN; [ $tree = cap ] && P=$CAP
    PYTHONPATH=$P timeout 100 python3 -m quickmoe bench moe --shapes qwen3-30b-a3b --formats fp8 \
      --tokens 16,1024,2048,4096,8192 --no-baselines -q --json $OUT/moe_${tree}_r$round.json \
      > $OUT/moe_${tree}_r$round.log 2>&1
    echo "bench moe $tree round $round rc $? ($SECONDS s)"
  done
done
python3 - <<'PY'
import json, glob, os, collections
out = os.environ["OUT"]
rows = collections.defaultdict(dict)
for path in sorted(glob.glob(f"{out}/moe_*_r*.json")):
    tree, rnd = os.path.basename(path)[4:-5].split("_")
    data = json.load(open(path))
    fp8 = data["ceilings"].get("fp8_tflops", 0)
    for r in data["rows"]:
        key = (r["shape"], r["format"], r["tokens"])
        rows[key][f"{tree}_{rnd}"] = (r["quickmoe_graph_s"] * 1e6, r["tflops"] / fp8 * 100 if fp8 else 0)
    print(path, data["ceilings"])
for key in sorted(rows, key=lambda k: (k[0], k[2])):
    cells = " ".join(f"{n} {us:8.1f} us {pct:4.1f}%" for n, (us, pct) in sorted(rows[key].items()))
    print(f"{key[0]:14s} T={key[2]:<5d} {cells}")
PY
for f in $OUT/sweep_*.log; do echo "== $f"; grep -v "^\s*$" $f | tail -14; done
echo "($SECONDS s)"
