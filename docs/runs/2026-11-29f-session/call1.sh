#!/usr/bin/env bash
# Session 2026-11-29f, call 1 (issue 16): coldstart2.sh start-threads: the 20b's start with the opt-in cuts in turns
set -uo pipefail
source scripts/device/env.sh
timeout 530 bash scripts/device/coldstart2.sh start-threads > "$OUT/start_threads_stage.log" 2>&1
echo "stage exit $? at $SECONDS s"
grep -E "^==|_seconds:" "$OUT/start_threads_stage.log" | head -60
python3 .ab/summ.py $(ls "$OUT"/cold2_20b_threads_*.json | sort -t_ -k5)
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
