#!/bin/bash
# Call 4 (2026-12-01 fourth session): 2791983 (positions in 32 bits, one-compare prefill masks) against the base
# (.ab/base = 54e6c29's src) end to end, in turns: bench generate 16 x 8000 -> 16 on gpt-oss-20b and on
# Qwen3-30B-A3B (12 layers, FP8 experts); then gpt-oss 64 x 1000 -> 256 (decode-heavy).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
G=/tmp/gpt-oss-20b; Q3=/tmp/qwen3-12l-fp8
timeout 150 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q & 
timeout 150 python3 -m quickmoe make-checkpoint $Q3 --preset qwen3-30b-a3b --weights fp8 --layers 12 -q &
wait; echo "checkpoints ($SECONDS s)"
run() {  # name ckpt args...
  local name=$1 ckpt=$2; shift 2
  for round in 1 2; do
    for tree in new base; do
      src=$PWD/src; [ $tree = base ] && src=$PWD/.ab/base/src
      PYTHONPATH=/tmp/site:$src timeout 90 python3 -m quickmoe bench generate $ckpt "$@" \
        --json $OUT/${name}_${tree}_r$round.json > $OUT/${name}_${tree}_r$round.log 2>&1
      echo "$name $tree round $round rc $? ($SECONDS s)"
    done
  done
  for f in $OUT/${name}_*.log; do echo "== $f"; grep -E '^quickmoe|by step kind|mixed step by op|at batch 1 by op' $f \
    | cut -c1-240; done
}
run g8k $G --num-prompts 16 --input-len 8000 --output-len 16
run q8k $Q3 --num-prompts 16 --input-len 8000 --output-len 16
[ $SECONDS -lt 420 ] && run g1k $G --num-prompts 64 --input-len 1000 --output-len 256
