#!/bin/bash
# Call 9 (2026-11-30 seventeenth session): the start-up moved to executor/runner_start.py (2e83067): the GPU-only
# paths (early start, Triton's / cuBLAS's / the tables' starts, the precompile, graphs) in fresh processes: the
# precompile's GPU test and bench coldstart -n 2 (with an empty-kernel-cache series and serve's defaults).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
(timeout 150 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > $OUT/make.log 2>&1; \
  echo "make rc $?" >> $OUT/make.log) &
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/models/test_kernel_precompile.py \
  tests/models/test_compile.py -k "precompile or fails_before" > $OUT/precompile_tests.log 2>&1
echo "precompile_tests rc $?: $(tail -1 $OUT/precompile_tests.log)"
wait; cat $OUT/make.log
timeout 110 python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 2 --device cuda --compare-cold-kernels \
  --json $OUT/coldstart.json > $OUT/coldstart.log 2>&1
echo "coldstart rc $?"
tail -25 $OUT/coldstart.log
