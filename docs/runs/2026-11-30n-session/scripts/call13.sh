#!/usr/bin/env bash
# Session 2026-11-30n call 13 (nvidia-h200): gpt-oss-20b's two MoE GEMMs in one launch (scripts/probes/
# moe_fused_decode.py: GEMM 2's tiles of an M tile wait on a counter that GEMM 1's tiles of it count up) against the
# two launches, T = 1-8, in a graph; its bits checked against the two launches first.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
timeout -k 10 150 python3 scripts/probes/moe_fused_decode.py --tokens 1,2,4,8 > "$OUT/fused.txt" 2>&1
echo "fused probe: exit $? in $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
tail -20 "$OUT/fused.txt" | cut -c1-600 >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
