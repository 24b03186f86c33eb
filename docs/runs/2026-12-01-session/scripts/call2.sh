#!/bin/bash
# Call 2 (2026-12-01 session): the rest of the pending GPU tests, side by side: the register-operand MoE kernels'
# tests (kernels moved to moe_register_kernels.py in 1fd3000) with the kernel count, and the engine's float32
# equivalences on CUDA (the committed prefill kernel cc4431c in the engine).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 400 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_gemm_register.py \
  tests/models/test_kernel_count.py > $OUT/register_tests_on_gpu.log 2>&1 &
QUICKMOE_TEST_DEVICE=cuda timeout 400 python3 -m pytest -q -p no:cacheprovider tests/models/test_engine.py \
  tests/models/test_cuda_graphs.py > $OUT/engine_tests_on_gpu.log 2>&1 &
wait
for log in register_tests_on_gpu engine_tests_on_gpu; do
  echo "$log: $(tail -1 $OUT/$log.log)"; grep -E '^(FAILED|ERROR)' $OUT/$log.log | head -20
done
echo "($SECONDS s)"
