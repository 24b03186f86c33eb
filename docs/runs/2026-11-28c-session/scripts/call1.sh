#!/usr/bin/env bash
# Session 2026-11-28c, call 1: swap-ab (decoded weights as wgmma's register operand) at prefill sizes.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
git log -1 --format=%H 2>/dev/null | tee -a "$OUT/gpu.txt"
sweep() {  # shape format tokens
  echo "== $1 $2 T=$3 ($(date +%T))" | tee -a "$OUT/swap_sweep.log"
  timeout 200 python3 scripts/probes/moe_config_sweep.py --shape "$1" --format "$2" --tokens "$3" \
    --block-m 64,128,256 --block-n 64 --block-n2 64,128 --block-k 64 --warps 4,8 --stages 3 --swap 1 \
    --group-m 8 --one-dot 1 --top 5 --json "$OUT/swap_$1_$2_$3.json" 2>&1 | grep -v skipped | tee -a "$OUT/swap_sweep.log"
}
sweep gpt-oss-20b mxfp4 8192
sweep mixtral-8x7b nvfp4 8192
sweep gpt-oss-20b mxfp4 1024
sweep mixtral-8x7b nvfp4 2048
echo "== done $(date +%T)"
