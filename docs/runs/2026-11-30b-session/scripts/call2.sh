#!/usr/bin/env bash
# Session 2026-11-30b call 2 (nvidia-h200): narrow one-program dense_gemm tiles at 1-16 rows (o_proj, QKV) against
# the table and cuBLAS; the router's K step / warps sweep at T = 1 on the H200.
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 300 python3 scripts/probes/dense_gemm_probe.py --rows 1,4,16 --json "$OUT/dense_probe.json" \
  > "$OUT/dense_probe.log" 2>&1
echo "dense probe: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
grep -E "^bits|^\||^ +[0-9]|rows=" "$OUT/dense_probe.log" | cut -c1-200
s=$(date +%s)
timeout -k 5 150 python3 scripts/probes/router_probe.py --sweep gpt-oss-20b --no-dense > "$OUT/router_probe.log" 2>&1
echo "router probe: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
grep -v -i warn "$OUT/router_probe.log" | tail -40 | cut -c1-200
