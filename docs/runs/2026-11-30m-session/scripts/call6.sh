#!/usr/bin/env bash
# Session 2026-11-30m call 6 (nvidia-h200): the precompile GPU test with its own KV-cache size, run after the
# CUDA-graph tests in one pytest process (the order in which call 4 found it out of GPU memory).
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt"
timeout -k 5 230 python3 -m pytest -q -m gpu tests/models/test_cuda_graphs.py tests/models/test_kernel_precompile.py \
  > "$OUT/tests_models.txt" 2>&1
echo "tests graphs + precompile: exit $? $(tail -1 $OUT/tests_models.txt)" >> "$OUT/summary.txt"
grep -hE "^(FAILED|ERROR)|^E  " "$OUT"/tests_models.txt | cut -c1-300 | head -20 >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
