#!/bin/bash
# Call 2 (2026-12-01 third session): prefill attention's 8 warps capped at 128 registers (the work tree) against the
# 4-warp launch (.ab/base = c065ca3's src) in turns: bench attention's prefill points, then bench generate with
# prompts of 8,000 tokens; then the prefill sweep of 16-warp and 32-query launches on gpt-oss, and the launches of
# Qwen3-30B-A3B's (32 / 4 heads of 128) and Mixtral's (32 / 8 of 128) shapes.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
CKPT=/tmp/gpt-oss-20b
timeout 120 python3 -m quickmoe make-checkpoint $CKPT --preset gpt-oss-20b -q; echo "checkpoint ($SECONDS s)"
for round in 1 2; do
  for tree in new base; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/.ab/base/src
    PYTHONPATH=/tmp/site:$src timeout 60 python3 -m quickmoe bench attention --batches 1 --contexts 1024 --windows 0,128 \
      --json $OUT/attn_${tree}_r$round.json > $OUT/attn_${tree}_r$round.log 2>&1
    echo "attention $tree round $round rc $? ($SECONDS s)"
  done
done
for f in $OUT/attn_*.log; do echo "== $f"; grep -A10 '^prefill (' $f | grep -v '^prefill (' ; done
for round in 1 2; do
  for tree in new base; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/.ab/base/src
    PYTHONPATH=/tmp/site:$src timeout 80 python3 -m quickmoe bench generate $CKPT --num-prompts 16 --input-len 8000 \
      --output-len 16 --json $OUT/gen8k_${tree}_r$round.json > $OUT/gen8k_${tree}_r$round.log 2>&1
    echo "generate 16 x 8000 $tree round $round rc $? ($SECONDS s)"
  done
done
for f in $OUT/gen8k_*.log; do echo "== $f"; grep -E '^quickmoe|by step kind' $f | cut -c1-300; done
timeout $((330 - SECONDS)) python3 scripts/probes/prefill_attention_sweep.py --block-q 16,32 --block-n 64 --warps 8,16 \
  --stages 1,2,3 --orders 1 --maxnreg 128 --json $OUT/sweep_gptoss.json > $OUT/sweep_gptoss.log 2>&1
echo "gpt-oss sweep rc $? ($SECONDS s)"; grep '^|' $OUT/sweep_gptoss.log | head -8
for shape in qwen3:32,4,128 mixtral:32,8,128; do
  timeout $((((590 - SECONDS) / 2) > 20 ? ((590 - SECONDS) / 2) : 20)) python3 scripts/probes/prefill_attention_sweep.py \
    --heads ${shape#*:} --block-q 16 --block-n 64 --warps 4,8 --stages 2,3,4 --orders 1 --maxnreg 0,128,168 \
    --json $OUT/sweep_${shape%%:*}.json > $OUT/sweep_${shape%%:*}.log 2>&1
  echo "${shape%%:*} sweep rc $? ($SECONDS s)"; grep '^|' $OUT/sweep_${shape%%:*}.log | head -10
done
