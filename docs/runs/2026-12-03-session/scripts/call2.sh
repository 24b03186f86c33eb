#!/bin/bash
# Call 2 (2026-12-03 session): call 1's decode steps again (host_step_probe.py fixed: Engine.live_request_ids):
# gpt-oss-20b, then Qwen3-30B-A3B FP8, the tree (decode graphs keep their padding rows out of the MoE) and main
# (.ab/main, 57ca07e) in turns; padded buckets (3 -> 4, 5 and 6 -> 8, 12 -> 16, 129 and 200 -> 256, ...) and exact.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8 G=/tmp/g20
([ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "20b checkpoint ready rc $?" >> $OUT/make_g.log) &
([ -d $Q ] || timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1
 echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
wait; cat $OUT/make_g.log $OUT/make_q.log 2>/dev/null | grep rc; echo "checkpoints ($SECONDS s)"
for m in g q; do
  ck=$G B=4,3,8,5,6,16,12,32,24,64,40,128,129,200,256
  [ $m = q ] && ck=$Q B=4,3,8,5,6,16,12,128,129,256
  for t in new main; do
    root=$PWD; [ $t != new ] && root=$PWD/.ab/$t
    [ $SECONDS -gt 480 ] && { echo "skipping $m $t ($SECONDS s)"; continue; }
    PYTHONPATH=/tmp/site:$root/src timeout 150 python3 scripts/probes/host_step_probe.py $ck --batch $B --input-len 200 \
      --steps 30 --no-cprofile > $OUT/decode_${m}_$t.log 2>&1
    echo "$m $t rc $? ($SECONDS s)"
    grep -E "^batch [0-9]+:" $OUT/decode_${m}_$t.log | awk '{printf "%s %s/%s | ", $2, $3, $12} END {print ""}'
  done
done
echo "($SECONDS s)"
