#!/usr/bin/env bash
# Session 2026-11-30l call 7 (nvidia-h200): the new GPU test of GEMM 1's gathered output on a planted bug (.ab/plant:
# the work tree with the epilogue's logical order built with s and q swapped); it must fail.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
PYTHONPATH=/tmp/site:$PWD/.ab/plant/src timeout -k 5 200 python3 -m pytest -q -m gpu -p no:cacheprovider \
  .ab/plant/tests/kernels/test_moe_gemm_register.py -k gathered > "$OUT/tests_planted.txt" 2>&1
echo "planted: exit $? $(tail -1 $OUT/tests_planted.txt) at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
grep -hE "^(FAILED|ERROR)|^E " "$OUT/tests_planted.txt" | cut -c1-200 | head -12 >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
