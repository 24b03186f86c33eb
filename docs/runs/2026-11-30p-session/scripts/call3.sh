#!/bin/bash
# Call 3 (2026-11-30 sixteenth session): the kernel tests on CUDA that call 2's limit stopped (call 2 reached
# test_fused_moe.py's end), in two processes side by side.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
timeout 500 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe_quantized.py \
  > $OUT/quantized_tests.log 2>&1 &
timeout 500 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_gemm_register.py \
  tests/kernels/test_glue_kernels.py tests/kernels/test_moe_align.py tests/kernels/test_moe_configs.py \
  tests/kernels/test_mxfp4_mma_pairs.py tests/kernels/test_mxfp4_ptx_decode.py tests/kernels/test_mxfp8_quant.py \
  tests/kernels/test_pdl.py tests/kernels/test_router.py tests/kernels/test_routing.py \
  tests/models/test_kernel_count.py > $OUT/other_kernel_tests.log 2>&1 &
wait
for log in quantized_tests other_kernel_tests; do
  echo "$log: $(tail -1 $OUT/$log.log)"; grep -E '^(FAILED|ERROR)' $OUT/$log.log | head -20
done
