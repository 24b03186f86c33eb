#!/bin/bash
# Call 1 (2026-12-03 second session): the LM head's logits left in bf16 for the sampler (the tree) against main
# (.ab/base, 03ba210), and decode buckets in steps of 16 above 32 (host_step_probe --decode-buckets) against the
# powers of two; the alignment one-program/chunked and LM head microbenchmarks while the checkpoints are made.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8 G=/tmp/g20
([ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "20b checkpoint ready rc $?" >> $OUT/make_g.log) &
([ -d $Q ] || timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1
 echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/unit/test_sampler.py -m gpu > $OUT/tests.log 2>&1
echo "sampler gpu tests rc $? ($SECONDS s): $(tail -1 $OUT/tests.log)"
timeout 150 python3 scripts/probes/align_lmhead_probe.py > $OUT/align_lmhead.log 2>&1
echo "align/lmhead probe rc $? ($SECONDS s)"
wait; cat $OUT/make_g.log $OUT/make_q.log 2>/dev/null | grep rc; echo "checkpoints ($SECONDS s)"
FINE=1,2,4,8,16,32,48,64,80,96,112,128,144,160,176,192,208,224,240,256
for m in g q; do
  ck=$G; [ $m = q ] && ck=$Q
  for t in new base fine; do
    root=$PWD; [ $t = base ] && root=$PWD/.ab/base
    extra=""; [ $t = fine ] && extra="--decode-buckets $FINE"
    [ $SECONDS -gt 510 ] && { echo "skipping $m $t ($SECONDS s)"; continue; }
    PYTHONPATH=/tmp/site:$root/src timeout 90 python3 scripts/probes/host_step_probe.py $ck \
      --batch 1,64,128,129,160,200,256 --input-len 200 --steps 30 --no-cprofile $extra > $OUT/decode_${m}_$t.log 2>&1
    echo "$m $t rc $? ($SECONDS s)"
    grep -E "^batch [0-9]+:" $OUT/decode_${m}_$t.log | awk '{printf "%s %s | ", $2, $12} END {print ""}'
  done
done
echo "--- align / LM head"; grep -v "^|---" $OUT/align_lmhead.log | tail -60
echo "($SECONDS s)"
