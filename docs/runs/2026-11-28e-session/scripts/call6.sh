#!/usr/bin/env bash
# Session 2026-11-28e, call 6 (H200): tune_moe.py --format nvfp4 for Qwen3-30B-A3B at T = 2048 and 8192 (merged into
# call 5's file of T = 1-1024), then bench moe in turns: base = main (the fallback for Qwen3 NVFP4) against qn = main
# with the tuned files.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p "$OUT/configs"; cp .ab/configs/*.json "$OUT/configs/"
timeout 330 python3 scripts/tune_moe.py --shapes qwen3-30b-a3b --format nvfp4 --tokens 2048,8192 \
  --out "$OUT/configs" 2>&1 | tee "$OUT/tune.txt" | grep -v skipped
rm -rf .ab/qn && mkdir -p .ab/qn && cp -r .ab/base/src .ab/qn/ && cp "$OUT"/configs/*.json .ab/qn/src/quickmoe/kernels/configs/
for run in base qn base qn; do
  { echo "-- $run"
    PYTHONPATH=/tmp/site:$PWD/.ab/$run/src timeout 100 python3 -m quickmoe bench moe --shapes qwen3-30b-a3b \
      --formats nvfp4 --tokens 1,16,64,1024,2048,8192 --no-baselines 2>&1 | grep -v INFO; } | tee -a "$OUT/ab_bench_moe_nvfp4.txt"
done
echo "== done $(date +%T)"
