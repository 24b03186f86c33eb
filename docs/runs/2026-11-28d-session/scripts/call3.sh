#!/usr/bin/env bash
# Session 2026-11-28d, call 3 (H200): the whole model with borrowed MoE configs ("new") vs the fallback (base):
# bench generate 256 x 1000 -> 1000 with the serving defaults, in turns new / base / new.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
CKPT=/tmp/gpt-oss-20b
t0=$(date +%s)
[ -f $CKPT/config.json ] || python3 -m quickmoe make-checkpoint $CKPT --preset gpt-oss-20b -q
echo "make-checkpoint: $(( $(date +%s) - t0 )) s" | tee "$OUT/make.txt"
i=0
for run in new base new; do
  i=$((i + 1)); root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src timeout 150 python3 -m quickmoe bench generate $CKPT --num-prompts 256 --input-len 1000 \
    --output-len 1000 > "$OUT/gen_${i}_$run.log" 2>&1
  { echo "-- $run"; grep -E "^quickmoe |decode at batch 1: median|by step kind|by op family" "$OUT/gen_${i}_$run.log"; } \
    | tee -a "$OUT/ab_generate.txt"
done
echo "== done $(date +%T)"
