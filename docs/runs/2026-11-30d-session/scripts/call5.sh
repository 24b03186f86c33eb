#!/bin/bash
# Call 5 (2026-11-30 fourth session): the engine's equivalences on CUDA in float32 (window 16: sliding layers past
# their window; graphs, chunked prefill, preemption, aborts) on the work tree (56ceed5: the window in the metadata).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
QUICKMOE_TEST_DEVICE=cuda timeout 140 python3 -m pytest -q -x tests/models/test_engine.py -p no:cacheprovider \
  > $OUT/engine_cuda.log 2>&1
echo "engine tests on cuda rc $?" > $OUT/summary.txt; tail -3 $OUT/engine_cuda.log >> $OUT/summary.txt
cat $OUT/summary.txt
