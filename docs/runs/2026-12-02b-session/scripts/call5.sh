#!/bin/bash
# Call 5 (2026-12-02 second session): the dense FP8 GEMV at its measured defaults (2 rows on 1 warp, one part;
# fp8_block_linear hands it one token). Its tests, the FP8 kernel tests and the families' GPU parity on CUDA; the
# probe at M = 1-2 without a sweep; bench generate Qwen3-30B-A3B FP8 16 x 1000 -> 128, dense GEMV off
# (QUICKMOE_FP8_DENSE_GEMV_MAX_TOKENS=0) / on (the default), in turns, two rounds.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8
(timeout 150 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make.log 2>&1;
 echo "checkpoint rc $?" >> $OUT/make.log) &
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_fp8_gemv.py tests/kernels/test_fp8_gemm.py \
  tests/kernels/test_moe_fp8_gemv.py tests/kernels/test_glue_kernels.py > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s): $(tail -1 $OUT/tests.log)"
wait; tail -1 $OUT/make.log
timeout 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_parity_families.py \
  > $OUT/tests_families.log 2>&1
echo "families tests rc $? ($SECONDS s): $(tail -1 $OUT/tests_families.log)"
timeout 100 python3 scripts/probes/fp8_dense_gemv_probe.py --tokens 1,2 --sweep-tokens '' \
  --json $OUT/dense_probe.json > $OUT/dense_probe.log 2>&1
echo "probe rc $? ($SECONDS s)"; grep -E "^\|" $OUT/dense_probe.log
for round in 1 2; do
  for v in 0 1; do
    QUICKMOE_FP8_DENSE_GEMV_MAX_TOKENS=$v timeout 75 python3 -m quickmoe bench generate $Q --num-prompts 16 \
      --input-len 1000 --output-len 128 --json $OUT/gen_r${round}_dense$v.json > $OUT/gen_r${round}_dense$v.log 2>&1
    echo "round $round dense gemv <= $v rc $? ($SECONDS s)"
    grep -E "^quickmoe |decode at batch 1: median|decode step at batch 1 by" $OUT/gen_r${round}_dense$v.log | cut -c1-260
  done
done
echo "($SECONDS s)"
