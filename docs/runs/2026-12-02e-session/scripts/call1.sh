#!/bin/bash
# Call 1 (2026-12-02 fifth session): is a lone prompt's prefill step bound by the host? scripts/probes/prefill_host_probe.py
# on Qwen3-30B-A3B FP8 and gpt-oss-20b, prompts of 500-8,000 tokens, profiler and cProfile.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8 G=/tmp/g20
([ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "20b checkpoint ready rc $?" >> $OUT/make_g.log) &
[ -d $Q ] || timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1
echo "qwen3 checkpoint rc $? ($SECONDS s)"
wait
timeout 200 python3 scripts/probes/prefill_host_probe.py $Q --lens 500,1000,2000,8000 > $OUT/prefill_q.log 2>&1
echo "qwen3 probe rc $? ($SECONDS s)"; grep -E "^prompt|^  wall|kernels:|host API" $OUT/prefill_q.log | cut -c1-400
timeout 150 python3 scripts/probes/prefill_host_probe.py $G --lens 500,1000,2000,8000 > $OUT/prefill_g.log 2>&1
echo "20b probe rc $? ($SECONDS s)"; grep -E "^prompt|^  wall|kernels:|host API" $OUT/prefill_g.log | cut -c1-400
echo "($SECONDS s)"
