#!/bin/bash
# Call 1 (2026-11-30 seventeenth session, issue 15): is cf6fda8 (the H200 decode rule keeps 4 warps up to 512
# programs) what brings the bf16 batch-invariance test back over its 99% bar? The per-module probe with the tree's
# rule and the old 2-warp rule, the quality tests with their table (-rP), then the attention kernel tests.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
cat $OUT/gpu.txt
timeout 420 bash scripts/device/hotpath.sh invariance
echo "invariance rc $?"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_kernels.py \
  > $OUT/attention_kernel_tests.log 2>&1
echo "attention_kernel_tests rc $?: $(tail -1 $OUT/attention_kernel_tests.log)"
grep -E '^(FAILED|ERROR)' $OUT/attention_kernel_tests.log | head
