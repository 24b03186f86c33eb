#!/usr/bin/env bash
# Session 2026-11-30o call 6 (nvidia-h200, 16 CPUs): the loader's settings on a warm page cache (issue 16: load rate
# >= 70% of pinned host->device; 52% in call 4 with the H100-measured defaults), gpt-oss-20b, in fresh processes.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
timeout -k 10 150 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make.log" 2>&1
WARM_RUNS=3 WARM_SETTINGS="default= t12=threads=12 t8=threads=8 t24=threads=24 c32b16=chunk_mib=32,buffers=16 \
c8b64=chunk_mib=8,buffers=64 b64=buffers=64 t12b48=threads=12,buffers=48 default2=" \
  timeout -k 10 480 bash scripts/device/loader_sweep.sh warm > "$OUT/sweep_stdout.txt" 2>&1
echo "sweep: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/sweep.txt" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
