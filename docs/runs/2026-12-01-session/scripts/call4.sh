#!/bin/bash
# Call 4 (2026-12-01 session, issue 15): the current tree (02fce6f: the eighteenth session's prefill kernel) end to
# end on the H200: bench generate 256 x 1000 -> 1000 (gpt-oss-20b shapes) and bench attention's default grid
# (batch 32 and 16 x 512 new in it).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 300 bash scripts/device/hotpath.sh generate 2>&1 | grep -v -i "warn" | tail -40
echo "generate done ($SECONDS s)"
timeout 200 bash scripts/device/hotpath.sh attention 2>&1 | tail -60
echo "attention done ($SECONDS s)"
