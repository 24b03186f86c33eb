#!/bin/bash
# Call 7 (2026-12-04 third session): the shipped-config reference test on the new H200 entries (Qwen3 NVFP4 key
# 8,192, Mixtral FP8 key 65) and the whole test's cases, with the FP8 cap test; the work tree.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 400 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_fused_moe_quantized.py \
  -k "shipped_tuned_configs or quantized_experts_bf16_on_the_gpu" --durations=5 > $OUT/gpu_tests.log 2>&1
echo "gpu tests: $(tail -1 $OUT/gpu_tests.log) ($SECONDS s)"; grep -E "FAILED|passed|failed" $OUT/gpu_tests.log | tail -8
