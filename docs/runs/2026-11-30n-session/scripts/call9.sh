#!/usr/bin/env bash
# Session 2026-11-30n call 9 (nvidia-h200): the mma.sync MoE GEMMs beside their ablation (`.a`: the same loads and
# mmas, the words' bits handed to the mma with no decode): how much of T = 1-4's time the decode's instructions hold.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
timeout -k 10 300 python3 scripts/probes/moe_sync_probe.py --shapes gpt-oss-20b --tokens 1,2,4,16 \
  --variants 2.1.4.2.1,2.1.4.2.1.a,4.1.4.1.1,4.1.4.1.1.a,4.1.4.3.1.a,2.1.4.1.1.a,8.1.4.2.1.a \
  --json "$OUT/probe20.json" > "$OUT/probe20.txt" 2>&1
echo "probe 20b: exit $? in $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
grep -E "Error|error:" "$OUT"/probe*.txt | head -5 | cut -c1-600 >> "$OUT/summary.txt"
sed -n '/GEMM 1 + GEMM 2 alone/,$p' "$OUT/probe20.txt" >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
