#!/bin/bash
# Call 1: scripts/tune_moe.py's pair-in-use path on the GPU (first run since f902934): Qwen3-30B-A3B FP8 at T = 65 and
# 96 (T = 65-96 have read key 65, the fallback's untuned middle config with GEMM 1's one dot), then the whole model
# with those entries (the tree, files copied in on the device) against main (.ab/base, 66de448):
# bench generate 80 x 1000 -> 500 and 96 x 1000 -> 500 of Qwen3-30B-A3B FP8, in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8
(timeout 220 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q --overwrite > $OUT/make_q.log 2>&1
 echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
mkdir -p $OUT/cfg && cp src/quickmoe/kernels/configs/E128_N*_K*_fp8_*_H200.json $OUT/cfg/
PYTHONPATH=src timeout 170 python3 scripts/tune_moe.py --shapes qwen3-30b-a3b --format fp8 --tokens 96,65 \
  --out $OUT/cfg > $OUT/tune_fp8.log 2>&1
echo "tune rc $?"; grep -v skipped $OUT/tune_fp8.log | tail -4; echo "($SECONDS s)"
cp $OUT/cfg/*.json src/quickmoe/kernels/configs/
wait; grep rc $OUT/make_q.log; echo "checkpoint ($SECONDS s)"
run() {  # tree prompts output-len tag
  local root=$PWD; [ $1 = base ] && root=$PWD/.ab/base
  PYTHONPATH=/tmp/site:$root/src timeout 90 python3 -m quickmoe bench generate $Q --num-prompts $2 --input-len 1000 \
    --output-len $3 --json $OUT/gen_$4_$1.json > $OUT/gen_$4_$1.log 2>&1
  echo "generate $4 $1 rc $? ($SECONDS s): $(grep -A1 'output tok/s' $OUT/gen_$4_$1.log | tail -1)"
}
run new 80 500 80a; run base 80 500 80a
run base 96 500 96a; run new 96 500 96a
[ $SECONDS -lt 440 ] && { run new 80 500 80b; run base 80 500 80b; }
[ $SECONDS -lt 500 ] && { run base 96 500 96b; run new 96 500 96b; }
echo "($SECONDS s)"
