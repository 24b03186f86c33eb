#!/usr/bin/env bash
# Session 2026-11-30o call 2 (nvidia-h200): the decode-sized MoE GEMMs timed as a decode step reads them (8 layers'
# experts, no call finding another's weights in L2): the tuned configs at T = 1-16 against the random-set timing the
# tuner uses, and a wider grid at T = 1.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
S=scripts/probes/moe_config_sweep.py
for L in 1 8; do
  timeout -k 10 150 python3 $S --tokens 1,2,4,8,16 --tuned-only --split 1 --layers $L --time-tuned \
    --json "$OUT/tuned_L$L.json" > "$OUT/tuned_L$L.txt" 2>&1
  echo "tuned layers $L: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
  grep -E 'tuned|^ ' "$OUT/tuned_L$L.txt" >> "$OUT/summary.txt"
done
timeout -k 10 330 python3 $S --tokens 1 --block-m 8 --block-n 16,32,64 --block-n2 16,32,64,128 --block-k 256 \
  --warps 2,4 --stages 3 --swap 1 --split 1,2,3,4,6 --layers 8 --top 10 --json "$OUT/grid_T1_L8.json" \
  > "$OUT/grid_T1_L8.txt" 2>&1
echo "grid T=1 layers 8: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
grep -v skipped "$OUT/grid_T1_L8.txt" | tail -30 >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
