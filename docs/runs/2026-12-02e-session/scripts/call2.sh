#!/bin/bash
# Call 2 (2026-12-02 fifth session): CUDA graphs of prompt steps (executor/prefill_graphs.py). The GPU tests (prompt
# graphs, prefill attention's zeroed rows, decode graphs), then scripts/probes/prefill_host_probe.py on Qwen3-30B-A3B
# FP8 and gpt-oss-20b with the graphs (default) and without (--prefill-graph-tokens 0), in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8 G=/tmp/g20
([ -d $Q ] || timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1
 echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
([ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "20b checkpoint ready rc $?" >> $OUT/make_g.log) &
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 6 tests/models/test_prefill_graphs.py \
  tests/kernels/test_attention_kernels.py tests/models/test_cuda_graphs.py -k "prefill or graph or Graph" \
  > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s): $(tail -1 $OUT/tests.log)"; grep -E "^(FAILED|ERROR)" $OUT/tests.log | head
wait; cat $OUT/make_q.log $OUT/make_g.log 2>/dev/null | grep rc
for m in q g; do
  ck=$Q; [ $m = g ] && ck=$G
  for t in graphs eager; do
    extra=""; [ $t = eager ] && extra="--prefill-graph-tokens 0"
    [ $SECONDS -gt 480 ] && { echo "skipping $m $t ($SECONDS s)"; continue; }
    timeout 150 python3 scripts/probes/prefill_host_probe.py $ck --lens 500,1000,2000 --cprofile-len 0 $extra \
      > $OUT/prefill_${m}_$t.log 2>&1
    echo "$m $t rc $? ($SECONDS s)"; grep -E "^idle|^prompt-step|^prompt|^  wall" $OUT/prefill_${m}_$t.log | cut -c1-250
  done
done
echo "($SECONDS s)"
