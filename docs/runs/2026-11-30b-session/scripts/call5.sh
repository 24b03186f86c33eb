#!/usr/bin/env bash
# Session 2026-11-30b call 5 (nvidia-h200): the alignment plan reading the chunks' histograms in blocks.
# The alignment tests on CUDA; the MoE layer's kernels (profiler) and bench moe, new / base in turns.
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_align.py > "$OUT/align_tests.log" 2>&1
echo "align tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/align_tests.log")" | tee -a "$OUT/timeline.txt"
grep -E '^(FAILED|ERROR)' "$OUT/align_tests.log" | head
for run in new base new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  s=$(date +%s)
  PYTHONPATH=/tmp/site:$root/src timeout -k 5 90 python3 scripts/probes/moe_kernel_split_probe.py \
    --shapes qwen3-30b-a3b --format fp8 --tokens 2048,8192 > "$OUT/split_$run.log" 2>&1
  PYTHONPATH=/tmp/site:$root/src timeout -k 5 90 python3 scripts/probes/moe_kernel_split_probe.py \
    --shapes gpt-oss-20b --format mxfp4 --tokens 8192 >> "$OUT/split_$run.log" 2>&1
  echo "-- $run split: $(( $(date +%s) - s )) s"; grep -v -i warn "$OUT/split_$run.log" | grep "T=" | cut -c1-200
done | tee "$OUT/split_ab.txt"
for run in new base new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  s=$(date +%s)
  PYTHONPATH=/tmp/site:$root/src timeout -k 5 120 python3 -m quickmoe bench moe --shapes qwen3-30b-a3b --formats fp8 \
    --tokens 2048,8192 --no-baselines > "$OUT/bench_moe_$run.log" 2>&1
  echo "-- $run bench moe: exit $? in $(( $(date +%s) - s )) s"; grep -E "^\||TFLOP|fp8" "$OUT/bench_moe_$run.log" | head -12
done | tee "$OUT/bench_moe_ab.txt"
