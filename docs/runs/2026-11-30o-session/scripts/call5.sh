#!/usr/bin/env bash
# Session 2026-11-30o call 5 (nvidia-h200): T = 1 tiles shaped like the fast reads of call 1 (many warps an SM, short
# K steps, deep pipelines): block_n 16/32, block_k 64/128, 1-2 warps, 4-8 stages, K in 1-2 parts, 8 layers' experts.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
S=$OUT/summary.txt
timeout -k 10 500 python3 scripts/probes/moe_config_sweep.py --tokens 1 --block-m 8 --block-n 16,32 --block-k 64,128 \
  --warps 1,2 --stages 4,6,8 --swap 1 --split 1,2 --layers 8 --top 12 --json "$OUT/grid_T1_short_k.json" \
  > "$OUT/grid_T1_short_k.txt" 2>&1
echo "grid: exit $? at $(( $(date +%s) - t0 )) s" >> $S
grep -v skipped "$OUT/grid_T1_short_k.txt" | tail -30 >> $S
grep -c skipped "$OUT/grid_T1_short_k.txt" >> $S
cat $S
