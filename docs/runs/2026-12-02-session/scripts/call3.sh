#!/bin/bash
# Call 3 (2026-12-02 session): the FP8 MoE GEMV (second version, defaults from call 2's sweep: GEMV 1 8 rows on 2
# warps, GEMV 2 16 rows on 1 warp; fused_moe takes it up to 8 tokens): its tests on CUDA; Mixtral's shape and
# Qwen3 at T = 16 in fp8_gemv_probe.py without a sweep; then a Qwen3-30B-A3B FP8 checkpoint and bench generate
# 16 x 1000 -> 128 with the GEMV off (QUICKMOE_FP8_GEMV_MAX_TOKENS=0) and on (the default), in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_fp8_gemv.py > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s)"; tail -2 $OUT/tests.log
timeout 110 python3 scripts/probes/fp8_gemv_probe.py --shapes mixtral-8x7b --tokens 1,2,4,8 --no-sweep \
  --json $OUT/probe_mixtral.json > $OUT/probe_mixtral.log 2>&1
echo "probe mixtral rc $? ($SECONDS s)"; grep "T=" $OUT/probe_mixtral.log
timeout 50 python3 scripts/probes/fp8_gemv_probe.py --shapes qwen3-30b-a3b --tokens 16 --no-sweep \
  --json $OUT/probe_q16.json > $OUT/probe_q16.log 2>&1
echo "probe qwen3 16 rc $? ($SECONDS s)"; grep "T=" $OUT/probe_q16.log
Q=/tmp/qwen3-fp8
timeout 150 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make.log 2>&1
echo "checkpoint rc $? ($SECONDS s)"
for v in 0 8; do
  QUICKMOE_FP8_GEMV_MAX_TOKENS=$v timeout 130 python3 -m quickmoe bench generate $Q --num-prompts 16 \
    --input-len 1000 --output-len 128 --json $OUT/gen_gemv$v.json > $OUT/gen_gemv$v.log 2>&1
  echo "generate gemv<=$v rc $? ($SECONDS s)"
  grep -E "by op family|decode step|output tok/s|batch-1" $OUT/gen_gemv$v.log | cut -c1-200
done
