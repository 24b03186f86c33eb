#!/bin/bash
# Call 2 (2026-12-02 sixth session): a prompt graph's padding rows kept out of the MoE (the tree) against the same
# tree without it (.ab/slot: fe3577e's src). GPU tests of the change, then prefill_host_probe.py at bucket sizes and
# past them, gpt-oss-20b and Qwen3-30B-A3B FP8, trees in turns; then decode steps at batch 128 / 129 / 256 (data on
# what the decode graphs' power-of-two padding costs).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8 G=/tmp/g20
([ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "20b checkpoint ready rc $?" >> $OUT/make_g.log) &
([ -d $Q ] || timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1
 echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 6 tests/models/test_prefill_graphs.py tests/kernels/test_routing.py \
  tests/kernels/test_router.py tests/kernels/test_fused_moe.py -k "padding or absent or graph or Graph" > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s): $(tail -1 $OUT/tests.log)"; grep -E "^(FAILED|ERROR)" $OUT/tests.log | head
wait; cat $OUT/make_g.log $OUT/make_q.log 2>/dev/null | grep rc
for m in g q; do
  ck=$G; [ $m = q ] && ck=$Q
  for t in new slot; do
    root=$PWD; [ $t != new ] && root=$PWD/.ab/$t
    [ $SECONDS -gt 440 ] && { echo "skipping $m $t ($SECONDS s)"; continue; }
    PYTHONPATH=/tmp/site:$root/src timeout 120 python3 scripts/probes/prefill_host_probe.py $ck \
      --lens 1024,1025,1100,1152,257 --cprofile-len 0 > $OUT/pad_${m}_$t.log 2>&1
    echo "$m $t rc $? ($SECONDS s)"; grep -E "^prompt of" $OUT/pad_${m}_$t.log | cut -c1-120
  done
done
for n in 128 129 256; do
  [ $SECONDS -gt 510 ] && { echo "skipping decode $n ($SECONDS s)"; continue; }
  timeout 80 python3 -m quickmoe bench generate $G --num-prompts $n --input-len 200 --output-len 128 --decode-steps 8 \
    > $OUT/decode_$n.log 2>&1
  echo "decode batch $n rc $? ($SECONDS s)"; grep -E "output tok/s|decode steps" $OUT/decode_$n.log | cut -c1-200
done
echo "($SECONDS s)"
