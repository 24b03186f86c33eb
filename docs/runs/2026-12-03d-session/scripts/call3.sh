#!/bin/bash
# Call 3: the whole model with call 2's tuned Qwen3 FP8 keys 128 and 256 (the tree) against main (.ab/base,
# 099a2bd): bench generate 256 x 1000 -> 1000 and 128 x 1000 -> 500 of Qwen3-30B-A3B FP8, in turns. While the
# checkpoint is made: the tuner at T = 256 for Qwen3's bf16 and NVFP4 experts (their files lack the key too).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8
(timeout 220 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1
 echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
mkdir -p $OUT/cfg && cp src/quickmoe/kernels/configs/E128_N*_K*_{dense,nvfp4}_*_H200.json $OUT/cfg/
for fmt in bf16 nvfp4; do
  PYTHONPATH=src timeout 110 python3 scripts/tune_moe.py --shapes qwen3-30b-a3b --format $fmt --tokens 256 \
    --out $OUT/cfg > $OUT/tune_$fmt.log 2>&1
  grep -v skipped $OUT/tune_$fmt.log | tail -2; echo "($SECONDS s)"
done
wait; grep rc $OUT/make_q.log; echo "checkpoint ($SECONDS s)"
run() {  # tree prompts output-len tag
  local root=$PWD; [ $1 = base ] && root=$PWD/.ab/base
  PYTHONPATH=/tmp/site:$root/src timeout 120 python3 -m quickmoe bench generate $Q --num-prompts $2 --input-len 1000 \
    --output-len $3 --json $OUT/gen_$4_$1.json > $OUT/gen_$4_$1.log 2>&1
  echo "generate $4 $1 rc $? ($SECONDS s): $(grep -A1 'output tok/s' $OUT/gen_$4_$1.log | tail -1)"
}
run new 256 1000 256a; run base 256 1000 256a
run base 128 500 128a; run new 128 500 128a
[ $SECONDS -lt 470 ] && { run new 256 1000 256b; run base 256 1000 256b; }
echo "($SECONDS s)"
