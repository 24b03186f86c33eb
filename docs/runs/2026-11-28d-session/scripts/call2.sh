#!/usr/bin/env bash
# Session 2026-11-28d, call 2 (H200): the FP8 / NVFP4 families with borrowed configs ("new") vs the fallback (base),
# then the FP8 layer's kernels under the profiler.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
for run in new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  { echo "-- $run"; PYTHONPATH=/tmp/site:$root/src timeout 150 python3 -m quickmoe bench moe \
      --shapes qwen3-30b-a3b,mixtral-8x7b --formats fp8,nvfp4 --tokens 1,1024,8192 --no-baselines 2>&1 | grep -v INFO; } \
      | tee -a "$OUT/ab_bench_moe_families.txt"
done
timeout 120 python3 scripts/probes/moe_kernel_split_probe.py --shapes qwen3-30b-a3b,mixtral-8x7b --format fp8 \
  --tokens 1,8192 2>&1 | grep -v INFO | tee "$OUT/kernel_split_fp8.log"
echo "== done $(date +%T)"
