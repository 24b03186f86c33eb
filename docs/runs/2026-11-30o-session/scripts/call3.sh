#!/usr/bin/env bash
# Session 2026-11-30o call 3 (nvidia-h200): (1) the floor of one small read in a graph (decode attention's 1 x 1k KV
# bytes, 2.1 MB; a 128-key window's 0.3 MB); (2) the mma.sync MoE kernels of the fourteenth session at the
# gpt-oss-120b's decode batches (T = 32-256, 1-8 assignments an expert) and the 20b's T = 16-64, against the files.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
timeout -k 10 120 python3 scripts/probes/read_floor_probe.py --contiguous-mb 0.3,2.1,8.4 --json "$OUT/read_small.json" \
  > "$OUT/read_small.txt" 2>&1
echo "read small: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
grep -E 'best|HBM' "$OUT/read_small.txt" >> "$OUT/summary.txt"
timeout -k 10 400 python3 scripts/probes/moe_sync_probe.py --shapes gpt-oss-120b,gpt-oss-20b --tokens 16,32,64,128,256 \
  --variants 4.1.4.2.1,2.1.4.2.1,4.1.4.1.1,4.2.4.2.1 --json "$OUT/sync_mid.json" > "$OUT/sync_mid.txt" 2>&1
echo "sync mid-T: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
grep -A40 'GEMM 1 + GEMM 2 alone' "$OUT/sync_mid.txt" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
