#!/usr/bin/env bash
# Session 2026-11-28d, call 4 (H200): gpt-oss-20b's T = 256 entry on the H200. "new" = the work tree (H200 files:
# the H100's entries, T = 256 the fallback's tile, which call 1 measured 8% faster there); .ab/b1 = borrowing only
# (the H100's T = 256 entry). bench moe at T = 128-512 in turns, then bench generate in turns new / b1 / new.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
for run in new b1 new b1; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  { echo "-- $run $(date +%T)"; PYTHONPATH=/tmp/site:$root/src timeout 60 python3 -m quickmoe bench moe --shapes gpt-oss-20b \
      --tokens 128,256,512 --no-baselines 2>&1 | grep -v INFO; } | tee -a "$OUT/ab_bench_moe_256.txt"
done
CKPT=/tmp/gpt-oss-20b
[ -f $CKPT/config.json ] || python3 -m quickmoe make-checkpoint $CKPT --preset gpt-oss-20b -q
i=0
for run in new b1 new; do
  i=$((i + 1)); root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src timeout 120 python3 -m quickmoe bench generate $CKPT --num-prompts 256 --input-len 1000 \
    --output-len 1000 > "$OUT/gen_${i}_$run.log" 2>&1
  { echo "-- $run"; grep -E "^quickmoe |decode at batch 1: median|by step kind" "$OUT/gen_${i}_$run.log"; } \
    | tee -a "$OUT/ab_generate.txt"
done
echo "== done $(date +%T)"
