#!/usr/bin/env bash
# Session 2026-11-30f call 7 (nvidia-h200): a register-operand GEMM 2 (moe_gemm2_register) against the engine's Triton
# GEMM 2 at T = 128-1024, each checked against the torch reference (scripts/probes/gemm1_register_probe.py).
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
s=$(date +%s)
timeout -k 5 200 python3 scripts/probes/gemm1_register_probe.py --tokens 256 --gemm2-tokens 128,256,512,1024 \
  --json "$OUT/gemm2_register.json" > "$OUT/gemm2_register.log" 2>&1
echo "probe: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
grep -v -i warn "$OUT/gemm2_register.log" | grep -v "values differ" | tail -30 | tee -a "$OUT/summary.txt"
