#!/bin/bash
# Call 2 (2026-12-02 second session): main with next/fp8-norm-quant merged (4f703ac, the work tree) against
# next/fp8-gemv-k-chunks rebased on it with 4 groups a K step for both GEMVs by default (29ac3a2, .ab/kc: src,
# tests, scripts). The branch's GEMV tests on CUDA; its probe at the defaults (no sweep); bench generate
# Qwen3-30B-A3B FP8 16 x 1000 -> 128, main / branch in turns, two rounds.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
MAIN=/tmp/site:$PWD/src
KC=/tmp/site:$PWD/.ab/kc/src
Q=/tmp/qwen3-fp8
(timeout 150 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make.log 2>&1;
 echo "checkpoint rc $?" >> $OUT/make.log) &
(cd .ab/kc && PYTHONPATH=$KC timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 \
  tests/kernels/test_moe_fp8_gemv.py tests/kernels/test_fused_moe_quantized.py > $OUT/kc_tests.log 2>&1)
echo "kc tests rc $? ($SECONDS s): $(tail -1 $OUT/kc_tests.log)"
wait; tail -1 $OUT/make.log
(cd .ab/kc && PYTHONPATH=$KC timeout 120 python3 scripts/probes/fp8_gemv_probe.py --shapes qwen3-30b-a3b \
  --tokens 1,2,4,8 --no-sweep --json $OUT/kc_probe.json > $OUT/kc_probe.log 2>&1)
echo "kc probe rc $? ($SECONDS s)"; grep -E "^\|" $OUT/kc_probe.log
for round in 1 2; do
  for tree in main kc; do
    P=$MAIN; [ $tree = kc ] && P=$KC
    PYTHONPATH=$P timeout 75 python3 -m quickmoe bench generate $Q --num-prompts 16 --input-len 1000 \
      --output-len 128 --json $OUT/gen_${tree}_r$round.json > $OUT/gen_${tree}_r$round.log 2>&1
    echo "round $round $tree rc $? ($SECONDS s)"
    grep -E "^quickmoe |decode at batch 1: median|decode step at batch 1 by" $OUT/gen_${tree}_r$round.log | cut -c1-260
  done
done
echo "($SECONDS s)"
