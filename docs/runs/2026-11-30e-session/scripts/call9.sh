#!/usr/bin/env bash
# Session 2026-11-30e call 9 (nvidia-h200): register caps on gpt-oss-20b's prefill-sized GEMM 1 tiles (T = 2,048,
# 4,096, 8,192), two turns; the tuned config and the capped one alternate inside each sweep's grid.
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
for turn in 1 2; do
  for caps in 0,168 168,0; do
    s=$(date +%s)
    timeout -k 5 200 python3 scripts/probes/moe_config_sweep.py --shape gpt-oss-20b --tuned-only --tokens 2048,4096,8192 \
      --maxnreg "$caps" --gemms 1 --split 1 --top 4 --json "$OUT/caps_${turn}_${caps/,/_}.json" \
      > "$OUT/caps_${turn}_${caps/,/_}.log" 2>&1
    echo "turn $turn caps $caps: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
    grep -E "^ +[0-9]" "$OUT/caps_${turn}_${caps/,/_}.log" | tee -a "$OUT/summary.txt"
  done
done
