#!/bin/bash
# Call 4 (2026-12-03 session): the headline `bench generate` (256 prompts x 1000 -> 1000, serve's defaults) with the
# tree (decode and prompt graphs keep their padding rows out of the MoE; e674c9e) against main (.ab/main, 57ca07e),
# gpt-oss-20b then Qwen3-30B-A3B FP8, trees in turns. All prompts end together: decode steps of 256 (an exact bucket)
# but for the tails of the prefill, so this checks that the exact buckets lost nothing end to end.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8 G=/tmp/g20
([ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "20b checkpoint ready rc $?" >> $OUT/make_g.log) &
([ -d $Q ] || timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1
 echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
wait; cat $OUT/make_g.log $OUT/make_q.log 2>/dev/null | grep rc; echo "checkpoints ($SECONDS s)"
for m in g q; do
  ck=$G; [ $m = q ] && ck=$Q
  for t in new main; do
    root=$PWD; [ $t != new ] && root=$PWD/.ab/$t
    [ $SECONDS -gt 150 ] && { echo "skipping $m $t ($SECONDS s)"; continue; }
    PYTHONPATH=/tmp/site:$root/src timeout 90 python3 -m quickmoe bench generate $ck --num-prompts 256 --input-len 1000 \
      --output-len 1000 --json $OUT/gen_${m}_$t.json > $OUT/gen_${m}_$t.log 2>&1
    echo "$m $t rc $? ($SECONDS s)"; tail -4 $OUT/gen_${m}_$t.log | cut -c1-160
  done
done
echo "($SECONDS s)"
