#!/usr/bin/env bash
# Session 2026-11-28d, call 6 (H200): Mixtral-8x7B NVFP4 with the mma-pair decode: each GEMM alone around the
# prefill tiles, both orientations (swap_ab), T = 8,192 and 2,048; the tuned config timed in the same run.
set -uo pipefail
source scripts/device/env.sh
S="python3 scripts/probes/moe_config_sweep.py --shape mixtral-8x7b --format nvfp4 --block-k 64 --stages 3 --group-m 8 --swap 0,1 --one-dot 1 --top 5"
for t in 8192 2048; do
  timeout 150 $S --tokens $t --block-m 128 --block-n 64,128 --warps 4,8 --json "$OUT/sweep_${t}_m128.json" 2>&1 \
    | grep -v -i warn | tee -a "$OUT/sweep_nvfp4.log"
  timeout 90 $S --tokens $t --block-m 256 --block-n 64,128 --warps 8 --json "$OUT/sweep_${t}_m256.json" 2>&1 \
    | grep -v -i warn | tee -a "$OUT/sweep_nvfp4.log"
done
echo "== done $(date +%T)"
