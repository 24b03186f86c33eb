#!/bin/bash
# Call 6 (2026-12-01 fifth session): the decode step's fused kernel (RoPE + KV write + attention) with the new k and
# v loaded beside q (a: .ab/a, same bits) and with the new key attended from registers, written after the loop
# (c: the work tree, no store + barrier before the span's copies) against 6ad9992 (.ab/w), in turns: the rotary
# sweep at the engine's configs, then bench generate 16 x 1000 -> 128 (batch-1 and batch-16 profiles). The
# attention kernel tests on c while the checkpoint is made.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
G=/tmp/gpt-oss-20b
timeout 150 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > /dev/null &
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_attention_kernels.py \
  > $OUT/attention_tests.log 2>&1
echo "attention tests: $(tail -1 $OUT/attention_tests.log) ($SECONDS s)"; wait
for round in 1 2; do
  for tree in c w a; do
    src=$PWD/src; [ $tree != c ] && src=$PWD/.ab/$tree/src
    PYTHONPATH=/tmp/site:$src timeout 100 python3 scripts/probes/decode_attention_sweep.py --rotary --windows 0,128 \
      --contexts 1024,4096 --batches 1,8,16,32 --configs n64w2s6k --no-extras --workers 8 \
      --json $OUT/rot_${tree}_r$round.json > $OUT/rot_${tree}_r$round.log 2>&1
    echo "rotary $tree round $round rc $? ($SECONDS s)"
  done
done
for round in 1 2; do
  for tree in c w a; do
    src=$PWD/src; [ $tree != c ] && src=$PWD/.ab/$tree/src
    PYTHONPATH=/tmp/site:$src timeout 90 python3 -m quickmoe bench generate $G --num-prompts 16 --input-len 1000 \
      --output-len 128 --json $OUT/gen_${tree}_r$round.json > $OUT/gen_${tree}_r$round.log 2>&1
    echo "generate $tree round $round rc $? ($SECONDS s)"
  done
done
for f in $OUT/rot_*_r2.log; do echo "== $f"; grep -E '^\| [0-9]' $f | cut -d'|' -f2,3 | tr '\n' ' '; echo; done
for f in $OUT/gen_*.log; do echo "== $f"; grep -E 'by op family' $f | cut -c1-120; done; echo "($SECONDS s)"
