#!/bin/bash
# Call 4 (2026-12-04 fourth session, issue 18): Mixtral-8x7B bf16's H200 decode-range key 65, which holds the
# fallback's 64-row one-dot tile for T = 65-160 (`untuned_moe_keys.py`), tuned with `tune_moe.py --span` at keys 65
# and 128 (key 65 then serves 65-96, key 128 97-192, key 256 193-320), checked in the model by
# scripts/device/moe_keys.sh against .ab/main (HEAD's files): 8 layers, decode steps of 96 and 160 sequences.
# Call 3's --span winner for Mixtral NVFP4's key 65 took its 72-sequence decode step -8.8%.
# Prediction: the decode steps at 96 and 160 sequences -3 to -10% (the H200's tuned keys 1-64 gained up to 21% at 64).
# First the fixed --span test on the GPU.
source scripts/device/env.sh
base=$OUT
trap 'cd $base && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_tune_moe_script.py -k span > $OUT/gpu_tests.log 2>&1
echo "gpu tests: $(tail -1 $OUT/gpu_tests.log) ($SECONDS s)"
OUT=$base/mixtral_bf16 PRESET=mixtral-8x7b FMT=bf16 LAYERS=8 TOKENS=65,128 PROMPTS="96 160" ROUNDS_S=330 \
  TUNE_ARGS=--span timeout 500 bash scripts/device/moe_keys.sh
echo "== mixtral bf16 done ($SECONDS s)"
grep -E "T=(65|128)" $base/mixtral_bf16/tune.log
