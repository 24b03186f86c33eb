#!/bin/bash
# Call 4 (2026-12-02 session): the tree with the FP8 GEMV's K bound (FP8_GEMV_MAX_K 2048) and its kernels named
# `_moe_gemv[12]_kernel` (the op-family profile counts them as MoE): the FP8 kernel tests and the families' GPU
# tests on CUDA (4 pytest-xdist processes), then a Qwen3-30B-A3B FP8 checkpoint and bench generate 16 x 1000 -> 128
# with the GEMV off / on, two rounds in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 170 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_moe_fp8_gemv.py \
  tests/kernels/test_fused_moe_quantized.py tests/unit/test_step_profile.py > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s)"; tail -3 $OUT/tests.log
timeout 80 python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_parity_families.py \
  > $OUT/tests_families.log 2>&1
echo "families tests rc $? ($SECONDS s)"; tail -3 $OUT/tests_families.log
Q=/tmp/qwen3-fp8
timeout 120 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make.log 2>&1
echo "checkpoint rc $? ($SECONDS s)"
for round in 1 2; do
  for v in 0 8; do
    QUICKMOE_FP8_GEMV_MAX_TOKENS=$v timeout 60 python3 -m quickmoe bench generate $Q --num-prompts 16 \
      --input-len 1000 --output-len 128 --json $OUT/gen_r${round}_gemv$v.json > $OUT/gen_r${round}_gemv$v.log 2>&1
    echo "round $round gemv<=$v rc $? ($SECONDS s)"
    grep -E "^quickmoe |decode at batch 1: median|decode step at batch 1 by" $OUT/gen_r${round}_gemv$v.log | cut -c1-230
  done
done
