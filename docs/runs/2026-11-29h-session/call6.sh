#!/usr/bin/env bash
# Session 2026-11-29h, call 6: Mixtral-8x7B FP8 (4 layers) bench generate, the session's tree (with the text_ids fix)
# against d2ee7c4 (.ab/base, with the same bench/generate.py), in turns.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 150 python3 -m quickmoe make-checkpoint /tmp/mxfp8 --preset mixtral-8x7b --weights fp8 --layers 4 -q \
  > "$OUT/make_mixtral_fp8.log" 2>&1
echo "checkpoint: exit $? ($SECONDS s)"
gen() {  # tree turn
  [ $SECONDS -gt 200 ] && { echo "skipping gen $1 $2: $SECONDS s gone"; return; }
  local root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  local log="$OUT/gen_mixtral_fp8_$1_$2.log"
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench generate /tmp/mxfp8 --num-prompts 64 \
    --input-len 1000 --output-len 64 --json "$OUT/gen_mixtral_fp8_$1_$2.json" > "$log" 2>&1
  echo "-- gen $1 $2 exit $? ($SECONDS s)"
  grep -E '^decode at batch 1: median|^decode step at batch|^throughput run by step' "$log" | cut -c1-260
}
gen new a; gen base a; gen new b; gen base b
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
