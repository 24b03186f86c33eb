#!/bin/bash
# Call 5: the shipped tuned configs at their real sizes against the float64 reference on the H200, with the keys tuned
# in calls 1-3 (Qwen3 FP8 70 and 96, Mixtral FP8 32-256, Mixtral NVFP4 96-256), and the config files' tests.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 280 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_fused_moe_quantized.py -k shipped \
  tests/kernels/test_moe_configs.py > $OUT/shipped_configs.log 2>&1
echo "pytest rc $? ($SECONDS s)"; tail -3 $OUT/shipped_configs.log
