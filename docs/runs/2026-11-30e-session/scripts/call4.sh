#!/usr/bin/env bash
# Session 2026-11-30e call 4 (nvidia-h200): the Gluon MXFP4 GEMM 1 probe with the register-operand variant
# against the engine's Triton GEMM 1 at T = 256 (balanced routing).
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 240 python3 scripts/probes/gluon_mxfp4_probe.py --json "$OUT/gluon_mxfp4.json" > "$OUT/gluon_mxfp4.log" 2>&1
echo "gluon probe: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
grep -v -i warn "$OUT/gluon_mxfp4.log" | tail -25 | tee -a "$OUT/summary.txt"
