#!/bin/bash
# Call 1 (2026-12-01 sixth session): branch next/decode-prefetch (7883c12, .ab/pf): the fused decode kernel loads
# its span's first block ids beside cos and sin and prefetches their K and V rows into L2 before its barrier.
# QUICKMOE_DECODE_PREFETCH=1 (on) against =0 (off: the kernel of main) in the same tree, in turns, two rounds:
# the rotary sweep at the engine's configs; then bench generate 16 x 1000 -> 128 (batch-1 / batch-16 profiles),
# main (work tree) against pf on. The attention kernel tests on pf (prefetch on) while the checkpoint is made.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
G=/tmp/gpt-oss-20b
PF=/tmp/site:$PWD/.ab/pf/src
timeout 150 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > /dev/null &
PYTHONPATH=$PF timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_attention_kernels.py \
  > $OUT/attention_tests_pf.log 2>&1
echo "attention tests (pf, prefetch on): $(tail -1 $OUT/attention_tests_pf.log) ($SECONDS s)"; wait
for round in 1 2; do
  for p in 1 0; do
    QUICKMOE_DECODE_PREFETCH=$p PYTHONPATH=$PF timeout 100 python3 scripts/probes/decode_attention_sweep.py --rotary \
      --windows 0,128 --contexts 1024,4096 --batches 1,8,16,32,64 --configs n64w2s6k --no-extras --workers 8 \
      --json $OUT/rot_p${p}_r$round.json > $OUT/rot_p${p}_r$round.log 2>&1
    echo "rotary prefetch=$p round $round rc $? ($SECONDS s)"
  done
done
for round in 1 2; do
  for tree in main pf; do
    src=$PWD/src; [ $tree = pf ] && src=$PWD/.ab/pf/src
    PYTHONPATH=/tmp/site:$src timeout 90 python3 -m quickmoe bench generate $G --num-prompts 16 --input-len 1000 \
      --output-len 128 --json $OUT/gen_${tree}_r$round.json > $OUT/gen_${tree}_r$round.log 2>&1
    echo "generate $tree round $round rc $? ($SECONDS s)"
  done
done
for f in $OUT/rot_*_r*.log; do echo "== $f"; grep -E '^\| [0-9]' $f | cut -d'|' -f2,3,4 | tr '\n' ' '; echo; done
for f in $OUT/gen_*.log; do echo "== $f"; grep -E 'by op family|batch-1 decode step' $f | cut -c1-140; done; echo "($SECONDS s)"
