#!/usr/bin/env bash
# Session 2026-11-30j call 5 (nvidia-h200-x2, GPU 0): the warm-up steps' GPU test alone (in call 4 it shared a pytest process
# with test_kernel_warmup.py, whose engine still held the GPU's memory when its fresh processes started).
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
QUICKMOE_CACHE_DIR=/tmp/qc-0 timeout -k 10 400 python3 -m pytest -q -rA -p no:cacheprovider -m gpu \
  tests/models/test_warmup_steps.py > "$OUT/tests_warmup_steps.log" 2>&1
echo "warmup steps: exit $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/tests_warmup_steps.log")" > "$OUT/summary.txt"
grep -E '^(FAILED|ERROR)' "$OUT/tests_warmup_steps.log" | head -5 >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
