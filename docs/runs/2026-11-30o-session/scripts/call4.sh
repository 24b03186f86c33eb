#!/usr/bin/env bash
# Session 2026-11-30o call 4 (nvidia-h200): the current tree's start-up (issue 16: weights_ready against `import torch`,
# the --compile on phases fresh and warm; 5 starts each) and `bench attention` (issue 15: 1 x 1k and against SDPA),
# gpt-oss-20b shapes. No engine code changed since these were last measured; a fresh reading for the notes.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
timeout -k 10 150 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make.log" 2>&1
echo "make: exit $? at $(( $(date +%s) - t0 )) s" >> $S
timeout -k 10 200 python3 -m quickmoe bench attention --json "$OUT/attention.json" > "$OUT/attention.txt" 2>&1
echo "bench attention: exit $? at $(( $(date +%s) - t0 )) s" >> $S
cat "$OUT/attention.txt" >> $S
timeout -k 10 420 python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 5 --device cuda --import-floor --compile on \
  --json "$OUT/coldstart.json" > "$OUT/coldstart.txt" 2>&1
echo "bench coldstart: exit $? at $(( $(date +%s) - t0 )) s" >> $S
tail -60 "$OUT/coldstart.txt" >> $S
cat $S
