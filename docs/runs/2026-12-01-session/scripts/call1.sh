#!/bin/bash
# Call 1 (2026-12-01 session): the GPU tests pending since the eighteenth session, first half: the GPU-marked model
# and unit tests, and kernels-a (attention, dense, FP8 GEMM, fused MoE kernel tests on CUDA).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
TESTS_PARTS="models kernels-a" timeout 570 bash scripts/device/hotpath.sh tests
echo "tests rc $? ($SECONDS s)"
