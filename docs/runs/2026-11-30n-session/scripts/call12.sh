#!/usr/bin/env bash
# Session 2026-11-30n call 12 (nvidia-h200): GEMM 2 alone at T = 1 on random MXFP4 experts of the same bytes and
# K from 720 to 11,520 (N x K = 2880 x 2880 ... ): does a warp's chain of K steps bound T = 1? The engine's T = 1
# Triton tile (K in 2 parts and in 1) and two mma.sync variants, us in a graph.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
timeout -k 10 200 python3 scripts/probes/moe_sync_probe.py --k-sweep 2880x2880,5760x1440,11520x720,1440x5760,720x11520 \
  --variants 2.1.4.2.1,4.1.4.1.1 --json "$OUT/ksweep.json" > "$OUT/ksweep.txt" 2>&1
echo "k sweep: exit $? in $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/ksweep.txt" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
