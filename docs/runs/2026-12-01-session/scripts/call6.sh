#!/bin/bash
# Call 6 (2026-12-01 session): the rest of the pending GPU tests: test_fused_moe.py whole (call 1 reached 99 of its
# 136 tests before the call's limit), and the families' bf16 parity against transformers on CUDA (Qwen3-MoE, Mixtral:
# the eighteenth session's prefill kernel at GQA groups of 8 and 4).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 450 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe.py > $OUT/fused_moe_tests_on_gpu.log 2>&1 &
timeout 450 python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_parity_families.py \
  > $OUT/families_gpu_tests.log 2>&1 &
wait
for log in fused_moe_tests_on_gpu families_gpu_tests; do
  echo "$log: $(tail -1 $OUT/$log.log)"; grep -E '^(FAILED|ERROR)' $OUT/$log.log | head -20
done
echo "($SECONDS s)"
