#!/usr/bin/env bash
# Session 2026-11-30g call 2 (nvidia-h200): the register-operand GEMMs at tiles of 8 and 16 rows: their GPU tests, then
# scripts/probes/moe_register_rows_probe.py on gpt-oss-120b and -20b decode batches (each GEMM alone in a graph).
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 200 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/kernels/test_moe_gemm_register.py \
  > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/gpu_tests.log")" | tee -a "$OUT/summary.txt"
grep -E '^(FAILED|ERROR)' "$OUT/gpu_tests.log" | head -20 | tee -a "$OUT/summary.txt"
s=$(date +%s)
timeout -k 5 $(( 560 - ($(date +%s) - t0) )) python3 scripts/probes/moe_register_rows_probe.py \
  --json "$OUT/rows_probe.json" > "$OUT/rows_probe.log" 2>&1
echo "probe: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
sed -n '/^GEMM 1 + GEMM 2/,$p' "$OUT/rows_probe.log" | tee -a "$OUT/summary.txt"
grep -E "Error|error:" "$OUT/rows_probe.log" | head -10 | tee -a "$OUT/summary.txt"
