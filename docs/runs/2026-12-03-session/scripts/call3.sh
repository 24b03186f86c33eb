#!/bin/bash
# Call 3 (2026-12-03 session): the single-program alignment counting absent assignments apart (E_POW2 over the used
# experts only; the tree) against the same tree with main's alignment (.ab/masked: the absent id as an extra expert,
# E_POW2 doubled at 32 and 128 experts) and main (.ab/main, 57ca07e: decode graphs do not mask their padding).
# GPU tests of the alignment and the padding paths; then host_step_probe.py decode steps, Qwen3-30B-A3B FP8 and
# gpt-oss-20b, the trees in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8 G=/tmp/g20
([ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "20b checkpoint ready rc $?" >> $OUT/make_g.log) &
([ -d $Q ] || timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1
 echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 8 tests/kernels/test_moe_align.py tests/kernels/test_fused_moe.py \
  tests/models/test_cuda_graphs.py tests/kernels/test_moe_fp8_gemv.py -k "align or absent or padding or padded" \
  > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s): $(tail -1 $OUT/tests.log)"; grep -E "^(FAILED|ERROR)" $OUT/tests.log | head
wait; cat $OUT/make_g.log $OUT/make_q.log 2>/dev/null | grep rc; echo "checkpoints ($SECONDS s)"
for m in q g; do
  ck=$Q B=4,3,8,5,16,12,128,129,256 trees="new masked main"
  [ $m = g ] && ck=$G B=4,3,8,5,32,24,128,129,256 trees="new main"
  for t in $trees; do
    root=$PWD; [ $t != new ] && root=$PWD/.ab/$t
    [ $SECONDS -gt 500 ] && { echo "skipping $m $t ($SECONDS s)"; continue; }
    PYTHONPATH=/tmp/site:$root/src timeout 100 python3 scripts/probes/host_step_probe.py $ck --batch $B --input-len 200 \
      --steps 30 --no-cprofile > $OUT/decode_${m}_$t.log 2>&1
    echo "$m $t rc $? ($SECONDS s)"
    grep -E "^batch [0-9]+:" $OUT/decode_${m}_$t.log | awk '{printf "%s %s/%s | ", $2, $3, $12} END {print ""}'
  done
done
echo "($SECONDS s)"
