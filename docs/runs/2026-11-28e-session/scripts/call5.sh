#!/usr/bin/env bash
# Session 2026-11-28e, call 5 (H200): scripts/tune_moe.py with --format (new, small grid) on Qwen3-30B-A3B's NVFP4
# experts (no tuned file on any device: the fallback ran) at decode and prefill sizes, then gpt-oss-20b's MXFP4 at
# T = 1 and 4 (its H200 file holds the H100's decode entries). Files land in $OUT/configs.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
mkdir -p "$OUT/configs"; cp src/quickmoe/kernels/configs/E32_*_NVIDIA_H200.json "$OUT/configs/"
timeout 400 python3 scripts/tune_moe.py --shapes qwen3-30b-a3b --format nvfp4 --tokens 1,16,64,1024 \
  --out "$OUT/configs" 2>&1 | tee "$OUT/tune.txt" | grep -v skipped
echo "-- $(date +%T)"
timeout 140 python3 scripts/tune_moe.py --shapes gpt-oss-20b --tokens 1,4 --out "$OUT/configs" 2>&1 \
  | tee -a "$OUT/tune.txt" | grep -v skipped
echo "== done $(date +%T)"
