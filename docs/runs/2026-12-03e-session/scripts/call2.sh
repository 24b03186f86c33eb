#!/bin/bash
# Call 2: Mixtral-8x7B FP8's H200 MoE files (keys 1, 2, 16, 64, 65, 1024-8192: T = 65-544 read key 65, the fallback's
# untuned middle config) tuned at T = 32, 96, 128, 256 with scripts/tune_moe.py, then the model (16 of Mixtral's 32
# layers: the MoE's share of a step is a layer's) with those entries (the tree, files copied in on the device) against
# main (.ab/base, 66de448): bench generate 128 x 1000 -> 500 and 256 x 1000 -> 500, in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
M=/tmp/mixtral-fp8
(timeout 240 python3 -m quickmoe make-checkpoint $M --preset mixtral-8x7b --weights fp8 --layers 16 -q --overwrite \
   > $OUT/make_m.log 2>&1; echo "mixtral checkpoint ready rc $?" >> $OUT/make_m.log) &
mkdir -p $OUT/cfg && cp src/quickmoe/kernels/configs/E8_N*_K*_fp8_*_H200.json $OUT/cfg/
PYTHONPATH=src timeout 260 python3 scripts/tune_moe.py --shapes mixtral-8x7b --format fp8 --tokens 128,256,96,32 \
  --out $OUT/cfg > $OUT/tune_fp8.log 2>&1
echo "tune rc $?"; grep -v skipped $OUT/tune_fp8.log | tail -5 | cut -c1-160; grep -o 'T=[0-9]*\|in use.*' $OUT/tune_fp8.log
echo "($SECONDS s)"
cp $OUT/cfg/*.json src/quickmoe/kernels/configs/
wait; grep rc $OUT/make_m.log; echo "checkpoint ($SECONDS s)"
run() {  # tree prompts output-len tag
  local root=$PWD; [ $1 = base ] && root=$PWD/.ab/base
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench generate $M --num-prompts $2 --input-len 1000 \
    --output-len $3 --json $OUT/gen_$4_$1.json > $OUT/gen_$4_$1.log 2>&1
  echo "generate $4 $1 rc $? ($SECONDS s): $(grep -A1 'output tok/s' $OUT/gen_$4_$1.log | tail -1)"
}
run new 128 500 128a; run base 128 500 128a
[ $SECONDS -lt 420 ] && { run base 256 500 256a; run new 256 500 256a; }
[ $SECONDS -lt 480 ] && { run new 128 500 128b; run base 128 500 128b; }
echo "($SECONDS s)"
