#!/usr/bin/env bash
# Session 2026-11-30e call 10 (nvidia-h200): the H200 GEMM 1 entry for T = 4,096 with a 168-register cap, in the
# layer: `bench moe` at T = 3,072 / 4,096 / 5,120 (the entry's range), new (this tree) and base (.ab/base) in turns;
# then the cap's bits test on the GPU.
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
for run in new base new base new base; do
  root=$PWD; [ $run = base ] && root=$PWD/.ab/base
  s=$(date +%s)
  PYTHONPATH=/tmp/site:$root/src timeout -k 5 120 python3 -m quickmoe bench moe --shapes gpt-oss-20b \
    --tokens 3072,4096,5120 --no-baselines -q > "$OUT/bench_moe_${run}_$s.txt" 2>&1
  echo "$run ($(( $(date +%s) - s )) s): $(grep -E '^gpt' "$OUT/bench_moe_${run}_$s.txt" | awk '{print $3, $4, $5}' | tr '\n' ' ')" \
    | tee -a "$OUT/summary.txt"
done
s=$(date +%s)
timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe.py -k "register_cap or gpt_oss_20b" \
  > "$OUT/moe_tests.log" 2>&1
echo "moe tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/moe_tests.log")" | tee -a "$OUT/summary.txt"
grep -E "^(FAILED|ERROR)" "$OUT/moe_tests.log" | head
