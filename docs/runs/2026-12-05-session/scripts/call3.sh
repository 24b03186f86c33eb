#!/bin/bash
# Call 3 (2026-12-05, nvidia-h100-x1, d8ba727): issue 18's layer and start-up figures on the H100
# (`families.sh moe coldstart`: bench moe of Qwen3-30B-A3B and Mixtral-8x7B, every format, beside F.grouped_mm bf16
# and transformers' experts; Qwen3 FP8 and NVFP4 checkpoints, bench coldstart -n 3 --compare-uncached), then the
# tuner's tests on CUDA (the key guard of d81f4de).
# Predictions: FP8 at T = 8,192 42-46% of the FP8 rate (H200 42-44%; H100 untuned FP8 keys at 65-544 do not touch
# 8,192); every format faster than grouped_mm except possibly Mixtral NVFP4 at prefill sizes (0.90-0.96x on the H200
# before TMA); processing <= 0.5 s for both formats (H200: 0.2-0.3 s); tuner tests 17 passed.
source scripts/device/env.sh
base=$OUT
trap 'cd $base && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 150 python3 -m pytest -p no:cacheprovider -q -rf tests/kernels/test_tune_moe_script.py > $OUT/tune_tests.log 2>&1
echo "tune tests rc $? ($SECONDS s): $(tail -1 $OUT/tune_tests.log)"
timeout 420 bash scripts/device/families.sh moe coldstart > $OUT/families.log 2>&1
echo "families rc $? ($SECONDS s)"; cat $OUT/make.txt 2>/dev/null
grep -E "T=8192|8192|rate|HBM" $OUT/bench_moe_families.txt | head -20 | cut -c1-250
for f in fp8 nvfp4; do grep -E "process|weights_ready|misses|import" $OUT/cold_qwen_$f.txt | head -8 | cut -c1-200; done
