#!/bin/bash
# Call 4: scripts/tune_moe.py for Qwen3-30B-A3B FP8 at T = 32 and 64 (T = 17-40 take key 16, 41-96 key 64), then
# the whole model with those entries (the tree, files copied in on the device) against main (.ab/base, e8b49fd):
# bench generate 32 x 1000 -> 500 and 64 x 1000 -> 500 of Qwen3-30B-A3B FP8, in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8
(timeout 220 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1
 echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
mkdir -p $OUT/cfg && cp src/quickmoe/kernels/configs/E128_N*_K*_fp8_*_H200.json $OUT/cfg/
PYTHONPATH=src timeout 150 python3 scripts/tune_moe.py --shapes qwen3-30b-a3b --format fp8 --tokens 64,32 \
  --out $OUT/cfg > $OUT/tune_fp8.log 2>&1
grep -v skipped $OUT/tune_fp8.log | tail -3; echo "($SECONDS s)"
cp $OUT/cfg/*.json src/quickmoe/kernels/configs/
wait; grep rc $OUT/make_q.log; echo "checkpoint ($SECONDS s)"
run() {  # tree prompts output-len tag
  local root=$PWD; [ $1 = base ] && root=$PWD/.ab/base
  PYTHONPATH=/tmp/site:$root/src timeout 90 python3 -m quickmoe bench generate $Q --num-prompts $2 --input-len 1000 \
    --output-len $3 --json $OUT/gen_$4_$1.json > $OUT/gen_$4_$1.log 2>&1
  echo "generate $4 $1 rc $? ($SECONDS s): $(grep -A1 'output tok/s' $OUT/gen_$4_$1.log | tail -1)"
}
run new 64 500 64a; run base 64 500 64a
run base 32 500 32a; run new 32 500 32a
[ $SECONDS -lt 420 ] && { run new 64 500 64b; run base 64 500 64b; }
[ $SECONDS -lt 470 ] && { run base 32 500 32b; run new 32 500 32b; }
echo "($SECONDS s)"
