#!/bin/bash
# Call 4: Qwen3-30B-A3B with bf16 experts (the layout Hugging Face ships): the H200 files (keys 1-64, 65, 1024, 1025:
# T = 65-544 read key 65, the fallback's middle config) tuned at T = 128, 96, 256 with scripts/tune_moe.py (the pair
# in use kept where it is as fast), then the model (24 of Qwen3's 48 layers: the disk holds 64 GB) with those entries
# against main (.ab/base, 66de448): bench generate 128 x 1000 -> 500 and 256 x 1000 -> 500, in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
rm -rf /tmp/qwen3-fp8 /tmp/mixtral-fp8 /tmp/mixtral-nvfp4
Q=/tmp/qwen3-bf16
(timeout 240 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights bf16 --layers 24 -q --overwrite \
   > $OUT/make_q.log 2>&1; echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
mkdir -p $OUT/cfg && cp src/quickmoe/kernels/configs/E128_N*_K*_dense_*_H200.json $OUT/cfg/
PYTHONPATH=src timeout 200 python3 scripts/tune_moe.py --shapes qwen3-30b-a3b --format bf16 --tokens 128,96,256 \
  --out $OUT/cfg > $OUT/tune_bf16.log 2>&1
echo "tune rc $?"; grep -o 'T=[0-9]*: gemm1 [0-9.]* us\|gemm2 [0-9.]* us\|in use.*' $OUT/tune_bf16.log
echo "($SECONDS s)"
cp $OUT/cfg/*.json src/quickmoe/kernels/configs/
wait; grep rc $OUT/make_q.log; echo "checkpoint ($SECONDS s)"
run() {  # tree prompts output-len tag
  local root=$PWD; [ $1 = base ] && root=$PWD/.ab/base
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench generate $Q --num-prompts $2 --input-len 1000 \
    --output-len $3 --json $OUT/gen_$4_$1.json > $OUT/gen_$4_$1.log 2>&1
  echo "generate $4 $1 rc $? ($SECONDS s): $(grep -A1 'output tok/s' $OUT/gen_$4_$1.log | tail -1)"
}
run new 128 500 128a; run base 128 500 128a
[ $SECONDS -lt 400 ] && { run base 256 500 256a; run new 256 500 256a; }
[ $SECONDS -lt 470 ] && { run new 128 500 128b; run base 128 500 128b; }
echo "($SECONDS s)"
