#!/usr/bin/env bash
# Session 2026-11-30f call 5 (nvidia-h200): the GPU tests the change touches (named results), then bench moe of
# gpt-oss-120b in turns: the work tree against .ab/v2 (the 120b's GEMM 1 key 1,024 also by the register kernel).
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
s=$(date +%s)
timeout -k 5 260 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/kernels/test_moe_gemm1_register.py \
  "tests/kernels/test_fused_moe.py::test_fused_moe_gpt_oss_20b_shapes_on_the_gpu" \
  tests/models/test_kernel_precompile.py > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/gpu_tests.log")" | tee -a "$OUT/summary.txt"
grep -E '^(PASSED|FAILED|ERROR)' "$OUT/gpu_tests.log" | tee -a "$OUT/summary.txt"
for run in new v2 new v2; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  s=$(date +%s)
  PYTHONPATH=/tmp/site:$root/src timeout -k 5 120 python3 -m quickmoe bench moe --shapes gpt-oss-120b \
    --tokens 256,512,1024,2048 --no-baselines > "$OUT/bench_moe_$run.log" 2>&1
  { echo "-- bench moe $run: exit $? in $(( $(date +%s) - s )) s"; grep -v INFO "$OUT/bench_moe_$run.log" | tail -6; } \
    | tee -a "$OUT/summary.txt"
  cat "$OUT/bench_moe_$run.log" >> "$OUT/bench_moe_all.log"; rm "$OUT/bench_moe_$run.log"
done
