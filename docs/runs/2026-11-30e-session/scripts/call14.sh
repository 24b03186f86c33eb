#!/usr/bin/env bash
# Session 2026-11-30e call 14 (nvidia-h200): the precompile hands each kernel to a worker as the dry launches record
# it (the working tree) against recording all first (.ab/base = 437f905): `serve --warmup auto` from launch to /health
# on a fresh cache, in turns; then the precompile's GPU tests on the new tree.
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
WARMUP_RUNS="auto:fresh:.:nobench auto:fresh:base:nobench auto:fresh:.:nobench auto:fresh:base:nobench" \
  timeout 400 bash scripts/device/hotpath.sh serve-warmup > "$OUT/hotpath.log" 2>&1
echo "serve-warmup rc $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
cat "$OUT/serve_warmup.txt" >> "$OUT/summary.txt"
grep -h "Triton kernels\|could not be compiled\|precompile" "$OUT"/serve_warmup_*.log | sed 's/.*\r//' | head -20 >> "$OUT/summary.txt"
s=$(date +%s)
timeout 150 python3 -m pytest -q -m gpu tests/models/test_kernel_precompile.py -p no:cacheprovider > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/gpu_tests.log")" | tee -a "$OUT/summary.txt"
cat "$OUT/summary.txt"
