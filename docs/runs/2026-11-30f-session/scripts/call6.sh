#!/usr/bin/env bash
# Session 2026-11-30f call 6 (nvidia-h200): the register-operand GEMM 1 end to end at batch 128 (the H200 file's key
# 128: 32-row tiles): bench generate 128 x 1000 -> 1000 in turns against 939832e (.ab/base).
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make.log" 2>&1
for run in new base new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  s=$(date +%s)
  PYTHONPATH=/tmp/site:$root/src timeout -k 5 150 python3 -m quickmoe bench generate /tmp/gpt-oss-20b --num-prompts 128 \
    --input-len 1000 --output-len 1000 > "$OUT/gen_$run.log" 2>&1
  { echo "-- $run: exit $? in $(( $(date +%s) - s )) s"
    grep -E "^quickmoe |decode at batch 1: median|by step kind|by op family" "$OUT/gen_$run.log"; } | tee -a "$OUT/summary.txt"
  cat "$OUT/gen_$run.log" >> "$OUT/gen_all.log"; rm "$OUT/gen_$run.log"
done
