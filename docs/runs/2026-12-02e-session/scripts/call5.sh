#!/bin/bash
# Call 5 (2026-12-02 fifth session): the flat prefill grid's tile search by slot starts (the tree) against its first
# version with a running sum (48b113b, .ab/flat1) and the session's start (146f704, .ab/base): prefill attention
# tests on CUDA, then `bench attention` prefill points in turns, two rounds.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 100 python3 -m pytest -q -p no:cacheprovider -n 6 tests/kernels/test_attention_kernels.py -k "prefill" > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s): $(tail -1 $OUT/tests.log)"; grep -E "^(FAILED|ERROR)" $OUT/tests.log | head
for round in 1 2; do
  for t in base flat1 new; do
    root=$PWD; [ $t != new ] && root=$PWD/.ab/$t
    PYTHONPATH=/tmp/site:$root/src timeout 60 python3 -m quickmoe bench attention --batches 1 --contexts 1024 \
      --windows 0,128 --prefill 1:1024,4:2048,1:8192,16:512,64:128 > $OUT/attn_r${round}_$t.log 2>&1
    echo "attention $t r$round rc $? ($SECONDS s)"
    sed -n '/^prefill (whole/,/^prefill:/p' $OUT/attn_r${round}_$t.log | awk 'NR>2 && NF==8 {printf "%sx%s w%s %s | ", $1,$2,$3,$4} END {print ""}'
  done
done
echo "($SECONDS s)"
