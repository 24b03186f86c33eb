#!/bin/bash
# Call 3 (2026-12-02 second session): the work tree = main (29ac3a2) + the dense FP8 GEMV (kernels/fp8_gemv.py,
# fp8_block_linear hands it up to 8 tokens). Its tests and the FP8 kernel tests on CUDA; the probe against the
# tensor-core kernel at Qwen3-30B-A3B's and Mixtral-8x7B's dense shapes with a sweep at M = 1 and 8; bench generate
# Qwen3-30B-A3B FP8 16 x 1000 -> 128 with the dense GEMV off (QUICKMOE_FP8_DENSE_GEMV_MAX_TOKENS=0) / on, in turns,
# two rounds.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8
(timeout 150 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make.log 2>&1;
 echo "checkpoint rc $?" >> $OUT/make.log) &
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_fp8_gemv.py tests/kernels/test_fp8_gemm.py \
  tests/kernels/test_moe_fp8_gemv.py > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s): $(tail -1 $OUT/tests.log)"
wait; tail -1 $OUT/make.log
timeout 260 python3 scripts/probes/fp8_dense_gemv_probe.py --rows 4,8,16 --warps 1,2 --groups 4,8 --split 1,2 \
  --json $OUT/dense_probe.json > $OUT/dense_probe.log 2>&1
echo "probe rc $? ($SECONDS s)"; grep -E "^\||best:" $OUT/dense_probe.log
for round in 1 2; do
  for v in 0 8; do
    QUICKMOE_FP8_DENSE_GEMV_MAX_TOKENS=$v timeout 75 python3 -m quickmoe bench generate $Q --num-prompts 16 \
      --input-len 1000 --output-len 128 --json $OUT/gen_r${round}_dense$v.json > $OUT/gen_r${round}_dense$v.log 2>&1
    echo "round $round dense gemv <= $v rc $? ($SECONDS s)"
    grep -E "^quickmoe |decode at batch 1: median|decode step at batch 1 by" $OUT/gen_r${round}_dense$v.log | cut -c1-260
  done
done
echo "($SECONDS s)"
