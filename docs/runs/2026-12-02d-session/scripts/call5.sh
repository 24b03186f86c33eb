#!/bin/bash
# Call 5 (2026-12-02 fourth session): the decode combine reading only the spans that hold keys (the tree) against
# 9478027 (.ab/base). The attention kernel tests on CUDA, then bench generate in turns on Qwen3-30B-A3B FP8 and
# gpt-oss-20b (16 x 1000 -> 128), two rounds (as the device time left allows: the rounds stop at 170 s).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8 G=/tmp/g20
([ -d $Q ] || timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1
 echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
([ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "20b checkpoint ready rc $?" >> $OUT/make_g.log) &
timeout 60 python3 -m pytest -q -p no:cacheprovider -n 8 tests/kernels/test_attention_kernels.py \
  -k "split or rotary_decode or bf16 or window" > $OUT/test_attention.log 2>&1
echo "attention tests rc $? ($SECONDS s): $(tail -1 $OUT/test_attention.log)"
grep -E "^(FAILED|ERROR)" $OUT/test_attention.log | head
wait; cat $OUT/make_q.log $OUT/make_g.log 2>/dev/null | grep rc
for round in 1 2; do
  for t in base new; do
    root=$PWD; [ $t != new ] && root=$PWD/.ab/$t
    for m in q g; do
      ck=$Q; [ $m = g ] && ck=$G
      [ $SECONDS -gt 170 ] && { echo "skipping $round $t $m ($SECONDS s)"; continue; }
      PYTHONPATH=/tmp/site:$root/src timeout 40 python3 -m quickmoe bench generate $ck \
        --num-prompts 16 --input-len 1000 --output-len 128 > $OUT/gen_${m}_r${round}_$t.log 2>&1
      echo "round $round $t $m rc $? ($SECONDS s)"
      grep -E "^quickmoe |decode at batch 1: median|^throughput run: GPU|decode step at batch 1 by" \
        $OUT/gen_${m}_r${round}_$t.log | cut -c1-200
    done
  done
done
echo "($SECONDS s)"
