#!/usr/bin/env bash
# Session 2026-11-30e call 13 (nvidia-h200): the probe with factor pairs (fragment_factors) beside the scale bytes, against the engine's Triton
# GEMM 1 at 8, 16, 32, 64 assignments an expert (T = 64, 128, 256, 512, balanced routing).
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 300 python3 scripts/probes/gluon_mxfp4_probe.py --json "$OUT/gluon_mxfp4_tok.json" \
  > "$OUT/gluon_mxfp4_tok.log" 2>&1
echo "gluon probe: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
grep -v -i warn "$OUT/gluon_mxfp4_tok.log" | tail -40 | tee -a "$OUT/summary.txt"
