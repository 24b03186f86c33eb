#!/bin/bash
# Call 10 (2026-12-01 third session): the MoE kernels' host code split into moe_gemm_operands.py, moe_program_tile.py
# and moe_align_kernels.py (2c9b3e0, 164ca0a; no code change) -- their kernel tests on CUDA.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 270 python3 -m pytest -q -p no:cacheprovider -n 10 --dist load tests/kernels/test_fused_moe.py \
  tests/kernels/test_moe_gemm_register.py tests/kernels/test_moe_align.py tests/kernels/test_fused_moe_quantized.py \
  > $OUT/moe_kernel_tests.log 2>&1
echo "rc $? ($SECONDS s): $(tail -1 $OUT/moe_kernel_tests.log)"; grep -E '^(FAILED|ERROR)' $OUT/moe_kernel_tests.log | head
