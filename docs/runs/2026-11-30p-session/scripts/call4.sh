#!/bin/bash
# Call 4 (2026-11-30 sixteenth session): the GPU-marked model and unit tests that call 2's limit stopped, and the
# register hand-over test fixed for CUDA (its recorders returned CPU tensors).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_gemm_register.py -k hands_gemm2 \
  > $OUT/register_handover_test.log 2>&1
echo "register_handover_test: $(tail -1 $OUT/register_handover_test.log)"
timeout 380 python3 -m pytest -q -p no:cacheprovider -m gpu tests/models tests/unit > $OUT/gpu_model_unit_tests.log 2>&1
echo "gpu_model_unit_tests rc $?: $(tail -1 $OUT/gpu_model_unit_tests.log)"
grep -E '^(FAILED|ERROR)' $OUT/gpu_model_unit_tests.log | head -20
