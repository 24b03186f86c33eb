#!/bin/bash
# Call 7 (2026-11-30 seventeenth session, issue 15): the GPU tests the H200's 2-warp decode rule reaches: the
# GPU-marked model and unit tests (bf16 parity with transformers, graphs, quality) and the engine's float32
# equivalences on CUDA, side by side (hotpath.sh tests, parts models and engine).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
TESTS_PARTS="models engine" timeout 540 bash scripts/device/hotpath.sh tests > $OUT/tests_stage.log 2>&1
echo "tests rc $? ($SECONDS s)"
tail -5 $OUT/tests_stage.log
for f in $OUT/gpu_tests.log $OUT/engine_tests_on_gpu.log; do echo "$f: $(tail -1 $f)"; grep -E '^(FAILED|ERROR)' $f | head; done
