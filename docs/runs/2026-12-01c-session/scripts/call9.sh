#!/bin/bash
# Call 9 (2026-12-01 third session): bench generate 256 x 1000 -> 1000 (gpt-oss-20b) on the session's final kernels.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 300 bash scripts/device/hotpath.sh generate > $OUT/hotpath_generate.log 2>&1
echo "hotpath generate rc $? ($SECONDS s)"
grep -E '^quickmoe|by op family|throughput run|decode at batch 1' $OUT/bench_generate.log | cut -c1-330
