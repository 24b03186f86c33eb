#!/usr/bin/env bash
# Session 2026-11-30b call 4 (nvidia-h200): a Gluon block-scaled FP8 GEMM (async wgmma, the promotion overlapped)
# against our Triton FP8 GEMM and torch._scaled_mm.
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 240 python3 scripts/probes/gluon_fp8_probe.py --json "$OUT/gluon_fp8_probe.json" > "$OUT/gluon_fp8_probe.log" 2>&1
echo "probe: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
grep -v -i warn "$OUT/gluon_fp8_probe.log" | tail -40 | cut -c1-250
