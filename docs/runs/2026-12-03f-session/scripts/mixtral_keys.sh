#!/bin/bash
# Calls 2 and 3 (FMT=fp8, FMT=nvfp4): Mixtral-8x7B's H200 MoE entries that equal the fallback's untuned tiles (FP8:
# key 64, read at T = 41-64, and key 65, T = 65-80; NVFP4: keys 48, 64 and 65, T = 41-80) tuned at T = 64, 48, 80
# with scripts/tune_moe.py (a winner is written only where it beats the pair in use by > 2%), then the model (16 of
# Mixtral's 32 layers: the MoE's share of a step is a layer's) with those entries (the work tree, files copied in on
# the device) against the committed files (.ab/main = 45f496d): bench generate 64 and 48 x 1000 -> 500, in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
FMT=${FMT:-fp8}
rm -rf /tmp/qwen3-fp8 /tmp/mixtral-fp8 /tmp/mixtral-nvfp4  # the disk holds 64 GB
M=/tmp/mixtral-$FMT
(timeout 240 python3 -m quickmoe make-checkpoint $M --preset mixtral-8x7b --weights $FMT --layers 16 -q --overwrite \
   > $OUT/make_m.log 2>&1; echo "mixtral checkpoint ready rc $?" >> $OUT/make_m.log) &
mkdir -p $OUT/cfg && cp src/quickmoe/kernels/configs/E8_N*_K*_${FMT}_*_H200.json $OUT/cfg/
PYTHONPATH=src timeout 250 python3 scripts/tune_moe.py --shapes mixtral-8x7b --format $FMT --tokens ${TOKENS:-64,48,80} \
  --out $OUT/cfg > $OUT/tune.log 2>&1
echo "tune rc $? ($SECONDS s)"; grep -o 'T=[0-9]*: gemm1 [0-9.]* us\|gemm2 [0-9.]* us\|in use.*' $OUT/tune.log | cut -c1-200
cp $OUT/cfg/*.json src/quickmoe/kernels/configs/
git status --short src/quickmoe/kernels/configs/
wait; grep rc $OUT/make_m.log; echo "checkpoint ($SECONDS s)"
run() {  # tree prompts tag
  local root=$PWD; [ $1 = base ] && root=$PWD/.ab/main
  PYTHONPATH=/tmp/site:$root/src timeout 90 python3 -m quickmoe bench generate $M --num-prompts $2 --input-len 1000 \
    --output-len 500 --json $OUT/gen_$3_$1.json > $OUT/gen_$3_$1.log 2>&1
  echo "generate $3 $1 rc $? ($SECONDS s): $(grep -A1 'output tok/s' $OUT/gen_$3_$1.log | tail -1)"
}
run new 64 64a; run base 64 64a
[ $SECONDS -lt 470 ] && { run base 48 48a; run new 48 48a; }
[ $SECONDS -lt 520 ] && { run new 64 64b; run base 64 64b; }
echo "($SECONDS s)"
