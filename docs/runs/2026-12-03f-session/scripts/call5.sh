#!/bin/bash
# Call 5: the shipped tuned configs at their real sizes against the float64 reference on the H200 (Mixtral's, with
# this session's keys 48, 64 and 80 in FP8 and NVFP4), the config files' tests, and the warm-up ladder's tests.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_fused_moe_quantized.py \
  -k "shipped and mixtral" > $OUT/shipped_configs.log 2>&1
echo "pytest rc $? ($SECONDS s)"; tail -3 $OUT/shipped_configs.log
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_moe_configs.py \
  tests/models/test_kernel_warmup.py > $OUT/config_tests.log 2>&1
echo "pytest rc $? ($SECONDS s)"; tail -3 $OUT/config_tests.log
