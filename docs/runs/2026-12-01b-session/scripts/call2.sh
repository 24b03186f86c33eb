#!/bin/bash
# Call 2 (2026-12-01 second session, issue 15): (a) the H200's one split at 256 (sequence, KV head) programs with 8
# stages (working tree) against the committed rule (.ab/base = ca71818's src), bench attention's full-layer decode at
# 16, 32, 64 sequences, in turns, two rounds; (b) hotpath.sh generate with the new mixed-step profile; (c) bench
# generate 64 x 1000 -> 64, default and --compile on, in turns (does compile buy anything at run time on the GPU?).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
for round in 1 2; do
  for tree in new base; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/.ab/base/src
    PYTHONPATH=/tmp/site:$src timeout 100 python3 -m quickmoe bench attention --batches 16,32,64 \
      --contexts 1024,4096,16384 --windows 0 --prefill "" --json $OUT/attn_${tree}_r$round.json \
      > $OUT/attn_${tree}_r$round.txt 2>&1
    echo "attention $tree round $round rc $? ($SECONDS s)"
  done
done
for tree in new base; do echo "== $tree"; grep -hE '^ +(16|32|64) +[0-9]+ +0 ' $OUT/attn_${tree}_r*.txt; done
timeout 170 bash scripts/device/hotpath.sh generate 2>&1 | grep -v -i warn | tail -14
echo "generate done ($SECONDS s)"
CKPT=/tmp/gpt-oss-20b
for run in off on off on; do
  [ $SECONDS -gt 520 ] && { echo "skipping compile $run: $SECONDS s"; continue; }
  timeout $((580 - SECONDS)) python3 -m quickmoe bench generate $CKPT --num-prompts 64 --input-len 1000 \
    --output-len 64 --compile $run --json $OUT/gen_compile_${run}_$SECONDS.json > $OUT/gen_compile_${run}_$SECONDS.log 2>&1
  echo "compile $run rc $? ($SECONDS s)"
done
for f in $OUT/gen_compile_*.log; do echo "== $f"; grep -E '^quickmoe|decode at batch 1: median|compile  |by op family' $f; done
