#!/bin/bash
# Call 6 (2026-12-01 second session, issue 15 item 6): the server's step profile on the GPU: its GPU test, then
# quickmoe serve --enable-step-profile + bench serve 1000 -> 1000 at concurrency 1, 32, 128 with --op-family-steps 8.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/models/test_step_profile_gpu.py > $OUT/profile_gpu_test.log 2>&1
echo "step profile GPU test: $(tail -1 $OUT/profile_gpu_test.log) ($SECONDS s)"; grep -E '^E ' $OUT/profile_gpu_test.log | head
SERVE_ARGS="--enable-step-profile" BENCH_SERVE_ARGS="--op-family-steps 8" timeout 330 bash scripts/device/hotpath.sh serve \
  2>&1 | grep -E 'health|concurrency|Output token|Median ITL|Failed|server step|server steps' | head -40
echo "serve done ($SECONDS s)"
