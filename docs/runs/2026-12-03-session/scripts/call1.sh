#!/bin/bash
# Call 1 (2026-12-03 session): decode graphs' padding rows kept out of the MoE (the tree) against main (57ca07e:
# only the prompt-step graphs mask theirs; .ab/main). GPU tests of the change and of last session's (the
# gpt-oss-triton padding test fixed to run its Triton kernels on the GPU); then host_step_probe.py decode steps at
# padded and exact bucket sizes, gpt-oss-20b, trees in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8 G=/tmp/g20
([ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "20b checkpoint ready rc $?" >> $OUT/make_g.log) &
([ -d $Q ] || timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1
 echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/models/test_prefill_graphs.py tests/models/test_cuda_graphs.py \
  tests/kernels/test_moe_fp8_gemv.py tests/kernels/test_routing.py tests/kernels/test_router.py \
  tests/kernels/test_fused_moe.py -k "padding or absent or graph or Graph or gemv or padded" > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s): $(tail -1 $OUT/tests.log)"; grep -E "^(FAILED|ERROR)" $OUT/tests.log | head
wait; cat $OUT/make_g.log $OUT/make_q.log 2>/dev/null | grep rc
B=4,3,8,5,6,16,12,32,24,64,40,128,129,200,256
for t in new main; do
  root=$PWD; [ $t != new ] && root=$PWD/.ab/$t
  [ $SECONDS -gt 470 ] && { echo "skipping $t ($SECONDS s)"; continue; }
  PYTHONPATH=/tmp/site:$root/src timeout 200 python3 scripts/probes/host_step_probe.py $G --batch $B --input-len 200 \
    --steps 30 --no-cprofile > $OUT/decode_g_$t.log 2>&1
  echo "g $t rc $? ($SECONDS s)"
  grep -E "^batch [0-9]+:" $OUT/decode_g_$t.log | awk '{printf "%s %s/%s | ", $2, $3, $12} END {print ""}'
done
echo "($SECONDS s)"
