#!/bin/bash
# Call 6 (2026-12-04 third session, issue 18): two of docs/acceptance.md's untuned H200 keys, each tuned and checked
# in the model against .ab/main (HEAD) by scripts/device/moe_keys.sh:
# 1. Qwen3-30B-A3B NVFP4, T = 1,024 and 8,192 (GEMM 2's keys there read the fallback's tile); PROMPTS 256.
#    Prediction: GEMM 2 at those keys 0-10% faster alone; the model's mixed steps -0 to -2%.
# 2. Mixtral-8x7B FP8, T = 65 (key 65 serves T = 65-72); PROMPTS 72 (decode steps of 72 sequences).
#    Prediction: the pair 0-5% faster alone (the H200's other tuned keys near it gained 3-14% a decode step).
base=$OUT
OUT=$base/qwen3_nvfp4 PRESET=qwen3-30b-a3b FMT=nvfp4 LAYERS=16 TOKENS=1024,8192 PROMPTS="256" ROUNDS_S=240 \
  bash scripts/device/moe_keys.sh
echo "== qwen3 nvfp4 done ($SECONDS s)"
OUT=$base/mixtral_fp8 PRESET=mixtral-8x7b FMT=fp8 LAYERS=8 TOKENS=65 PROMPTS="72" ROUNDS_S=200 \
  bash scripts/device/moe_keys.sh
echo "== mixtral fp8 done ($SECONDS s)"
cd $base && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null
