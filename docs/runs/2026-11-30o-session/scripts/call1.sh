#!/usr/bin/env bash
# Session 2026-11-30o call 1 (nvidia-h200): the read floor. A pure read of the experts' bytes the MoE reads at
# T = 1-4 (4, 8, 15 experts of gpt-oss-20b shapes), in a graph as the MoE is timed, beside the tuned GEMMs at T = 1.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
timeout -k 10 400 python3 scripts/probes/read_floor_probe.py --json "$OUT/read_floor.json" > "$OUT/read_floor.txt" 2>&1
echo "read floor: exit $? in $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
grep -A200 '^best read' "$OUT/read_floor.txt" >> "$OUT/summary.txt"
head -3 "$OUT/read_floor.txt" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
