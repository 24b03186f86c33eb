#!/bin/bash
# Call 6: Qwen3-30B-A3B bf16's H200 keys 32 and 64 (the fallback's untuned 16-row tiles, read at T = 25-64) tuned at
# T = 32, 64, 48 with scripts/tune_moe.py (a winner written only where > 2% faster than the pair in use), then the
# model (12 of its 48 layers: the MoE's share of a step is a layer's) with those entries against the committed files
# (.ab/main): bench generate 64 and 32 x 1000 -> 500, in turns, while the device time lasts.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
rm -rf /tmp/qwen3-fp8 /tmp/mixtral-fp8 /tmp/mixtral-nvfp4
Q=/tmp/qwen3-bf16
(timeout 150 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights bf16 --layers 12 -q --overwrite \
   > $OUT/make_q.log 2>&1; echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
mkdir -p $OUT/cfg && cp src/quickmoe/kernels/configs/E128_N*_K*_dense_*_H200.json $OUT/cfg/
PYTHONPATH=src timeout 130 python3 scripts/tune_moe.py --shapes qwen3-30b-a3b --format bf16 --tokens 32,64,48 \
  --out $OUT/cfg > $OUT/tune.log 2>&1
echo "tune rc $? ($SECONDS s)"; grep -o 'T=[0-9]*: gemm1 [0-9.]* us\|gemm2 [0-9.]* us\|in use.*' $OUT/tune.log | cut -c1-120
cp $OUT/cfg/*.json src/quickmoe/kernels/configs/
git status --short src/quickmoe/kernels/configs/
git diff --quiet src/quickmoe/kernels/configs/ && { echo "nothing written"; exit 0; }
wait; grep rc $OUT/make_q.log; echo "checkpoint ($SECONDS s)"
run() {  # tree prompts tag
  local root=$PWD; [ $1 = base ] && root=$PWD/.ab/main
  PYTHONPATH=/tmp/site:$root/src timeout 45 python3 -m quickmoe bench generate $Q --num-prompts $2 --input-len 1000 \
    --output-len 500 --json $OUT/gen_$3_$1.json > $OUT/gen_$3_$1.log 2>&1
  echo "generate $3 $1 rc $? ($SECONDS s): $(grep -A1 'output tok/s' $OUT/gen_$3_$1.log | tail -1)"
}
run new 64 64a; run base 64 64a
[ $SECONDS -lt 200 ] && { run base 32 32a; run new 32 32a; }
[ $SECONDS -lt 230 ] && { run new 64 64b; run base 64 64b; }
echo "($SECONDS s)"
