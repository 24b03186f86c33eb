#!/usr/bin/env bash
# Session 2026-11-28e, call 7 (H200): tune_moe.py for the FP8 experts of Qwen3-30B-A3B and Mixtral-8x7B (the H200
# borrowed the H100's files) and for Mixtral NVFP4's decode sizes (its H200 file holds the fallback there), then
# bench moe in turns: base = main against new = main with call 6's Qwen3 NVFP4 files and these.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p "$OUT/configs"; cp src/quickmoe/kernels/configs/E8_*_nvfp4_NVIDIA_H200.json "$OUT/configs/"
timeout 170 python3 scripts/tune_moe.py --shapes qwen3-30b-a3b --format fp8 --tokens 1,16,64,1024,2048,8192 \
  --out "$OUT/configs" 2>&1 | tee "$OUT/tune.txt" | grep -v skipped
timeout 170 python3 scripts/tune_moe.py --shapes mixtral-8x7b --format fp8 --tokens 1,16,1024,2048,8192 \
  --out "$OUT/configs" 2>&1 | tee -a "$OUT/tune.txt" | grep -v skipped
timeout 60 python3 scripts/tune_moe.py --shapes mixtral-8x7b --format nvfp4 --tokens 1,16 \
  --out "$OUT/configs" 2>&1 | tee -a "$OUT/tune.txt" | grep -v skipped
rm -rf .ab/new && mkdir -p .ab/new && cp -r .ab/base/src .ab/new/ && cp .ab/configs/*.json "$OUT"/configs/*.json .ab/new/src/quickmoe/kernels/configs/
for run in base new base new; do
  { echo "-- $run"
    PYTHONPATH=/tmp/site:$PWD/.ab/$run/src timeout 100 python3 -m quickmoe bench moe --shapes qwen3-30b-a3b,mixtral-8x7b \
      --formats fp8 --tokens 1,16,1024,2048,8192 --no-baselines 2>&1 | grep -v INFO
    PYTHONPATH=/tmp/site:$PWD/.ab/$run/src timeout 40 python3 -m quickmoe bench moe --shapes mixtral-8x7b \
      --formats nvfp4 --tokens 1,16 --no-baselines 2>&1 | grep -v INFO | tail -2; } | tee -a "$OUT/ab_bench_moe.txt"
done
echo "== done $(date +%T)"
