#!/bin/bash
# Call 4 (2026-12-01 fifth session): sliding decode layers on the H200 at 2 warps, 6 stages up to 256 programs
# (the work tree) against 27f3d82 (.ab/base) in turns: bench attention's grid, then bench generate 16 x 1000 -> 256
# (sliding layers at 128 programs); the attention kernel tests on CUDA while the checkpoint is made.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
G=/tmp/gpt-oss-20b
timeout 150 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q &
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_attention_kernels.py \
  > $OUT/attention_tests.log 2>&1
echo "attention tests: $(tail -1 $OUT/attention_tests.log) ($SECONDS s)"; wait
for round in 1 2; do
  for tree in new base; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/.ab/base/src
    PYTHONPATH=/tmp/site:$src timeout 90 python3 -m quickmoe bench attention --json $OUT/attn_${tree}_r$round.json \
      > $OUT/attn_${tree}_r$round.log 2>&1
    echo "attention $tree round $round rc $? ($SECONDS s)"
  done
done
for round in 1 2; do
  for tree in new base; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/.ab/base/src
    PYTHONPATH=/tmp/site:$src timeout 90 python3 -m quickmoe bench generate $G --num-prompts 16 --input-len 1000 \
      --output-len 256 --json $OUT/gen16_${tree}_r$round.json > $OUT/gen16_${tree}_r$round.log 2>&1
    echo "generate $tree round $round rc $? ($SECONDS s)"
  done
done
for f in $OUT/attn_*_r2.log; do echo "== $f"; grep -E "^decode:|^prefill:" $f; done
for f in $OUT/gen16_*.log; do echo "== $f"; grep -E '^quickmoe|by step kind|by op' $f | cut -c1-220; done
echo "($SECONDS s)"
