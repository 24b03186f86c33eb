#!/usr/bin/env bash
# Session 2026-11-29g, call 6 (issue 18): call 5's whole-model A/B had one prefill step and 7 mixed steps a run, too
# few to resolve the ~5% predicted; here bench generate 256 x 1000 -> 4 (32 steps of 8,192 prompt tokens a run) on
# Qwen3-30B-A3B FP8, the work tree (c47d54f) against 334110a (.ab/base), in turns.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m quickmoe make-checkpoint /tmp/q3fp8 --preset qwen3-30b-a3b --weights fp8 -q > "$OUT/make_q3fp8.log" 2>&1
echo "checkpoint: exit $? ($SECONDS s)"
gen() {  # tree turn
  [ $SECONDS -gt 420 ] && { echo "skipping gen $1 $2: $SECONDS s gone"; return; }
  local root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  local log="$OUT/gen256_q3fp8_$1_$2.log"
  PYTHONPATH=/tmp/site:$root/src timeout 130 python3 -m quickmoe bench generate /tmp/q3fp8 --num-prompts 256 \
    --input-len 1000 --output-len 4 --json "$OUT/gen256_q3fp8_$1_$2.json" > "$log" 2>&1
  echo "-- gen $1 $2 exit $? ($SECONDS s)"
  grep -E '^quickmoe |^throughput run by step kind' "$log" | cut -c1-400
}
gen new a; gen base a; gen new b; gen base b
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
