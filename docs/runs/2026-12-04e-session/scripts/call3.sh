#!/bin/bash
# Call 3 (2026-12-04 fifth session, issues 15 and 18).
# 1. The GPU tests of the prompt-step graphs and of the precompile (which records each prompt graph's step) on the
#    new default (96adb09: buckets up to 8,192 tokens, 103 graphs).
# 2. Qwen3-30B-A3B NVFP4's key 128, outgrown on the H200 (`untuned_moe_keys.py --outgrown`: 16-row tiles read over
#    T = 97-576, 8 -> 36 rows an expert): `moe_keys.sh` with TOKENS=128,256,512 (--span), 16 layers, decode at 128
#    and 256 sequences against .ab/main (HEAD's tables).
#    Prediction: at T = 256-512 a 32- or 64-row tile wins by 5-15% alone; the 256-sequence decode step -2 to -6%
#    (the MoE is ~50% of it), 128 sequences level (key 128 kept or re-tuned within 2%).
source scripts/device/env.sh
base=$OUT
trap 'cd $base && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 4 -rf tests/models/test_prefill_graphs.py \
  tests/models/test_kernel_precompile.py > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s): $(tail -1 $OUT/tests.log)"; grep -E "^(FAILED|ERROR)" $OUT/tests.log | head
OUT=$base/qwen3_nvfp4 PRESET=qwen3-30b-a3b FMT=nvfp4 LAYERS=16 TOKENS=128,256,512 PROMPTS="256 128" ROUNDS_S=270 \
  bash scripts/device/moe_keys.sh
echo "== qwen3 nvfp4 done ($SECONDS s)"
