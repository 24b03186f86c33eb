#!/usr/bin/env bash
# Session 2026-11-28c, call 6: gpt-oss-120b's GEMMs alone at T = 8,192, transposed tiles vs the tuned ones.
set -uo pipefail
source scripts/device/env.sh
timeout 200 python3 scripts/probes/moe_config_sweep.py --shape gpt-oss-120b --format mxfp4 --tokens 8192 \
  --block-m 128,256 --block-n 64 --block-n2 64,128 --block-k 64 --warps 4,8 --stages 3 --swap 1 \
  --group-m 8 --one-dot 1 --top 5 2>&1 | grep -v skipped | tee "$OUT/swap_sweep_120b.log"
echo "== done $(date +%T)"
