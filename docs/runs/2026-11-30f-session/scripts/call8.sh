#!/usr/bin/env bash
# Session 2026-11-30f call 8 (nvidia-h200): GEMM 2 by the register-operand kernel too (the H200 file's keys 128 and 256):
# the GPU tests it touches, bench moe in turns against 939832e (.ab/base), bench generate 256 x 1000 -> 1000 in turns
# against 1522a2d (.ab/g1: GEMM 1 only).
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make.log" 2>&1 &
mk=$!
s=$(date +%s)
timeout -k 5 150 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/kernels/test_moe_gemm_register.py \
  "tests/kernels/test_fused_moe.py::test_fused_moe_gpt_oss_20b_shapes_on_the_gpu" -k "register or None-128 or None-256 or forced5 or forced8" \
  > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/gpu_tests.log")" | tee -a "$OUT/summary.txt"
grep -E '^(PASSED|FAILED|ERROR)' "$OUT/gpu_tests.log" | tee -a "$OUT/summary.txt"
for run in new base new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src timeout -k 5 90 python3 -m quickmoe bench moe --shapes gpt-oss-20b \
    --tokens 128,256,512 --no-baselines > "$OUT/bench_moe_$run.log" 2>&1
  { echo "-- bench moe $run: exit $?"; grep "gpt-oss-20b " "$OUT/bench_moe_$run.log"; } | tee -a "$OUT/summary.txt"
  cat "$OUT/bench_moe_$run.log" >> "$OUT/bench_moe_all.log"; rm "$OUT/bench_moe_$run.log"
done
wait $mk
for run in new g1 new g1; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  s=$(date +%s)
  PYTHONPATH=/tmp/site:$root/src timeout -k 5 100 python3 -m quickmoe bench generate /tmp/gpt-oss-20b --num-prompts 256 \
    --input-len 1000 --output-len 1000 > "$OUT/gen_$run.log" 2>&1
  { echo "-- $run: exit $? in $(( $(date +%s) - s )) s"
    grep -E "^quickmoe |by step kind|at batch 256 by op family" "$OUT/gen_$run.log"; } | tee -a "$OUT/summary.txt"
  cat "$OUT/gen_$run.log" >> "$OUT/gen_all.log"; rm "$OUT/gen_$run.log"
done
