#!/bin/bash
# Call 7 (2026-12-01 second session): the step profile's GPU test with the trace's acc_events=True (torch's warning
# that events are cleared per cycle no longer reaches the log).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/models/test_step_profile_gpu.py > $OUT/profile_gpu_test.log 2>&1
echo "step profile GPU test: $(tail -1 $OUT/profile_gpu_test.log) ($SECONDS s)"; grep -E '^E ' $OUT/profile_gpu_test.log | head
echo "torch's 'clears events' warning: $(grep -c 'clears events' $OUT/profile_gpu_test.log) lines"
