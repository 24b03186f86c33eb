#!/usr/bin/env bash
# Session 2026-11-30n call 4 (nvidia-h200): the mma.sync MoE GEMMs with K in 1, 2, 3 or 5 parts (each program's
# float32 sums stored, the tile's last program adds them: kernels/tickets.py's protocol), loads two steps ahead,
# against the H200 files' tiles at T = 1-16, each GEMM alone in a graph, outputs checked against the torch reference.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
timeout -k 10 300 python3 scripts/probes/moe_sync_probe.py --shapes gpt-oss-20b --tokens 1,2,4,8,16 \
  --variants 4.1.4.2.1,2.1.4.2.1,4.1.2.2.1,4.1.2.2.2,2.1.2.2.2,4.1.1.2.3,2.1.1.2.3,4.1.1.2.5,2.2.2.2.2 \
  --json "$OUT/probe20.json" > "$OUT/probe20.txt" 2>&1
echo "probe 20b: exit $? in $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
timeout -k 10 200 python3 scripts/probes/moe_sync_probe.py --shapes gpt-oss-120b --tokens 1,2,4 \
  --variants 4.1.2.2.2,2.1.2.2.2,4.1.1.2.3 --json "$OUT/probe120.json" > "$OUT/probe120.txt" 2>&1
echo "probe 120b: exit $? in $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
grep -E "Error|error:" "$OUT"/probe*.txt | head -5 | cut -c1-600 >> "$OUT/summary.txt"
sed -n '/GEMM 1 + GEMM 2 alone/,$p' "$OUT/probe20.txt" "$OUT/probe120.txt" >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
