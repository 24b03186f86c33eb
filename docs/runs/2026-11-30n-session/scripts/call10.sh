#!/usr/bin/env bash
# Session 2026-11-30n call 10 (nvidia-h200): GEMM 2 of the mma.sync MoE GEMMs reading a pre-tiled copy of its words
# (`.t`: each 16-row block's step of 256 columns one contiguous 2 KB run; does DRAM locality bound T = 1?) beside the
# plain layout and the no-decode ablation (`.a`).
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
timeout -k 10 300 python3 scripts/probes/moe_sync_probe.py --shapes gpt-oss-20b --tokens 1,2,4,16 \
  --variants 2.1.4.2.1,2.1.4.2.1.t,2.1.4.2.1.a,4.1.4.2.1,4.1.4.2.1.t,4.1.4.1.1,4.1.4.1.1.t,2.1.4.3.1.t \
  --json "$OUT/probe20.json" > "$OUT/probe20.txt" 2>&1
echo "probe 20b: exit $? in $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
grep -E "Error|error:" "$OUT"/probe*.txt | head -5 | cut -c1-600 >> "$OUT/summary.txt"
sed -n '/GEMM 1 + GEMM 2 alone/,$p' "$OUT/probe20.txt" >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
