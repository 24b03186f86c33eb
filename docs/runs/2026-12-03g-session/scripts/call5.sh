#!/bin/bash
# Call 5: Mixtral bf16's H200 tables as committed (call 3's tuned keys 1-64, the fallback's regimes written out at
# keys 65, 1024 and 1025): the shipped-config reference test for them and the config files' tests, then
# `bench generate` on an 8-layer Mixtral bf16, 64 and 256 x 1000 -> 500, the tree and .ab/main (no table) in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
M=/tmp/moe-keys-mixtral-8x7b-bf16
rm -rf /tmp/gc-ab-*
[ -f $M/config.json ] || (timeout 300 python3 -m quickmoe make-checkpoint $M --preset mixtral-8x7b --weights bf16 \
  --layers 8 -q --overwrite > $OUT/make.log 2>&1; echo "checkpoint rc $?" >> $OUT/make.log) &
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_fused_moe_quantized.py \
  -k "shipped and mixtral and bf16" > $OUT/shipped_configs.log 2>&1
echo "pytest rc $? ($SECONDS s): $(tail -1 $OUT/shipped_configs.log)"
timeout 100 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_moe_configs.py > $OUT/config_tests.log 2>&1
echo "pytest rc $? ($SECONDS s): $(tail -1 $OUT/config_tests.log)"
wait; ls $M/config.json || exit 1
run() {  # tree prompts tag
  local root=$PWD; [ $1 = base ] && root=$PWD/.ab/main
  PYTHONPATH=/tmp/site:$root/src timeout 90 python3 -m quickmoe bench generate $M --num-prompts $2 --input-len 1000 \
    --output-len 500 --json $OUT/gen_$3_$1.json > $OUT/gen_$3_$1.log 2>&1
  echo "$3 $1 rc $? ($SECONDS s): $(grep -A1 'output tok/s' $OUT/gen_$3_$1.log | tail -1 | awk '{print $4}') tok/s;" \
    "$(grep -o 'decode at batch 1: median step [0-9.]* ms' $OUT/gen_$3_$1.log);" \
    "$(grep -o 'by step kind: decode.*' $OUT/gen_$3_$1.log | grep -o '(median [0-9.]* ms' | tr '\n' ' ')"
}
run new 64 64a; run base 64 64a; run base 256 256a; run new 256 256a
[ $SECONDS -lt 330 ] && { run base 64 64b; run new 64 64b; }
[ $SECONDS -lt 360 ] && { run new 256 256b; run base 256 256b; }
