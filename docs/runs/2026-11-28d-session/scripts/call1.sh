#!/usr/bin/env bash
# Session 2026-11-28d, call 1 (H200): MoE configs borrowed from the H100 (same sm_90) vs the fallback the H200 got
# until now. Work tree "new" (borrowing) vs .ab/base (HEAD: no files for the H200 -> fallback), bench moe in turns;
# then the FP8 layer's kernels at T = 8,192 under the profiler.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch; print(repr(torch.cuda.get_device_name()), torch.cuda.get_device_capability())" | tee -a "$OUT/gpu.txt"
first=1
for run in new base new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  baselines=--no-baselines; [ $first = 1 ] && baselines=; first=0
  { echo "-- $run $(date +%T)"; PYTHONPATH=/tmp/site:$root/src timeout 120 python3 -m quickmoe bench moe --shapes gpt-oss-20b \
      --tokens 1,2,4,16,64,256,1024,8192 $baselines 2>&1 | grep -v INFO; } | tee -a "$OUT/ab_bench_moe_20b.txt"
done
echo "== done $(date +%T)"
