#!/usr/bin/env bash
# Session 2026-11-30f call 3 (nvidia-h200): the register-operand GEMM 1 with its weights by TMA (dispatched from the
# H200 file's keys 128 and 256): GPU tests, the probe at T = 16-2048, bench moe in turns against 939832e (.ab/base).
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 300 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_moe_gemm1_register.py \
  tests/kernels/test_fused_moe.py > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/gpu_tests.log")" | tee -a "$OUT/summary.txt"
grep -E '^(FAILED|ERROR)|Error' "$OUT/gpu_tests.log" | head -20 | tee -a "$OUT/summary.txt"
s=$(date +%s)
timeout -k 5 300 python3 scripts/probes/gemm1_register_probe.py --stages 3 --json "$OUT/gemm1_register.json" \
  > "$OUT/gemm1_register.log" 2>&1
echo "probe: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
grep -v -i warn "$OUT/gemm1_register.log" | grep -v "values differ" | tee -a "$OUT/summary.txt"
for run in new base new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  s=$(date +%s)
  PYTHONPATH=/tmp/site:$root/src timeout -k 5 240 python3 -m quickmoe bench moe --shapes gpt-oss-20b \
    --tokens 64,128,256,512,1024 --no-baselines > "$OUT/bench_moe_$run.log" 2>&1
  { echo "-- bench moe $run: exit $? in $(( $(date +%s) - s )) s"; grep -v INFO "$OUT/bench_moe_$run.log" | tail -12; } \
    | tee -a "$OUT/summary.txt"
  cat "$OUT/bench_moe_$run.log" >> "$OUT/bench_moe_all.log"
done
