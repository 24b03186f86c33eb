#!/usr/bin/env bash
# Session 2026-11-30f call 1-2 (nvidia-h200): the register-operand GEMM 1 (moe_gemm1_register.py) checked and timed against the
# engine's Triton GEMM 1 at T = 128-512, random routing; its SASS stats.
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 400 python3 scripts/probes/gemm1_register_probe.py --tokens 128,256,384,512 --stages 3,4 \
  --json "$OUT/gemm1_register.json" > "$OUT/gemm1_register.log" 2>&1
echo "probe: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
grep -v -i warn "$OUT/gemm1_register.log" | tail -60 | tee -a "$OUT/summary.txt"
