#!/bin/bash
# Call 4 (2026-11-30 eighteenth session, issue 15): prefill attention's softmax step with the scale in one FMA per
# logit (the work tree, plus unpredicated K/V loads in whole tiles; .ab/fma: the FMA only) against f37be7a (.ab/s4):
# whole-tile key loop 768 -> 612 -> 598 SASS instructions a thread a step (sm_90, compiled on the development
# machine). Predicted: 10-20% off long prompts (1 x 8,192 1.80 -> ~1.55 ms). Bits change (the FMA rounds once):
# the attention kernel tests and the bf16 quality tests on CUDA first, then bench attention in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
AB_RUNS="new fma s4 new fma s4" timeout 520 bash scripts/device/hotpath.sh ab-attention
echo "ab rc $? ($SECONDS s)"
awk '/^-- /{print} NF==8 && $1 ~ /^[0-9]+$/ {print}' $OUT/ab_attention.txt
