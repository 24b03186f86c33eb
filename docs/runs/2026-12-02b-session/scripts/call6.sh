#!/bin/bash
# Call 6 (2026-12-02 second session): call 5's throughput runs with the dense GEMV on had slower single prefill and
# mixed steps (133 / 116 ms against 101 / 102 ms). The same bench generate again in the other order (on first),
# two rounds, printing the step kinds.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8
timeout 150 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make.log 2>&1
echo "checkpoint rc $? ($SECONDS s)"
for round in 1 2; do
  for v in 1 0; do
    QUICKMOE_FP8_DENSE_GEMV_MAX_TOKENS=$v timeout 75 python3 -m quickmoe bench generate $Q --num-prompts 16 \
      --input-len 1000 --output-len 128 --json $OUT/gen_r${round}_dense$v.json > $OUT/gen_r${round}_dense$v.log 2>&1
    echo "round $round dense gemv <= $v rc $? ($SECONDS s)"
    grep -E "^quickmoe |decode at batch 1: median|throughput run" $OUT/gen_r${round}_dense$v.log | cut -c1-400
  done
done
echo "($SECONDS s)"
