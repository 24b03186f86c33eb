#!/bin/bash
# Call 3: Mixtral-8x7B NVFP4's H200 MoE files (keys 1-64, 65, 1024-8192: T = 65-544 read key 65, the fallback's
# middle config with GEMM 1's one dot) tuned at T = 128, 256, 96 with scripts/tune_moe.py, then the model (16 of
# Mixtral's 32 layers) with those entries (the tree, files copied in on the device) against main (.ab/base, 66de448,
# which has the same NVFP4 files as 0a16de2): bench generate 128 x 1000 -> 500 and 256 x 1000 -> 500, in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
rm -rf /tmp/qwen3-fp8 /tmp/mixtral-fp8  # the disk holds 64 GB
M=/tmp/mixtral-nvfp4
(timeout 240 python3 -m quickmoe make-checkpoint $M --preset mixtral-8x7b --weights nvfp4 --layers 16 -q --overwrite \
   > $OUT/make_m.log 2>&1; echo "mixtral checkpoint ready rc $?" >> $OUT/make_m.log) &
mkdir -p $OUT/cfg && cp src/quickmoe/kernels/configs/E8_N*_K*_nvfp4_*_H200.json $OUT/cfg/
PYTHONPATH=src timeout 240 python3 scripts/tune_moe.py --shapes mixtral-8x7b --format nvfp4 --tokens 128,256,96 \
  --out $OUT/cfg > $OUT/tune_nvfp4.log 2>&1
echo "tune rc $?"; grep -o 'T=[0-9]*: gemm1 [0-9.]* us\|gemm2 [0-9.]* us\|in use.*' $OUT/tune_nvfp4.log
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
[ $SECONDS -lt 480 ] && { run new 256 500 256b; run base 256 500 256b; }
echo "($SECONDS s)"
