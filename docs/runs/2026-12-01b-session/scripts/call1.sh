#!/bin/bash
# Call 1 (2026-12-01 second session): the whole GPU test stage in pytest-xdist processes (69d5ee1), never run so:
# models, kernels-a, kernels-b and engine side by side, TEST_WORKERS=5 for the kernel parts.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
nproc > $OUT/nproc.txt
timeout 575 bash scripts/device/hotpath.sh tests
echo "tests rc $? ($SECONDS s)"
