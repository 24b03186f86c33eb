#!/bin/bash
# Call 2 (2026-11-30 sixteenth session): the GPU tests on the current tree (26c1af2: kernels/moe_gemm.py split into
# host code and two kernel modules last session, whose CUDA tests stopped at the call limit): hotpath.sh tests.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
timeout 570 bash scripts/device/hotpath.sh tests > $OUT/hotpath_tests.txt 2>&1
echo "hotpath tests rc $?" >> $OUT/hotpath_tests.txt
tail -30 $OUT/hotpath_tests.txt
