#!/bin/bash
# Call 5 (2026-11-30 eighteenth session, issue 15): prefill attention's query tiles on absolute multiples of 16
# (a row's key grouping no longer depends on how its prompt was chunked: windowed layers' rows differed by 1.8e-7
# in float32 between a whole and a chunked prompt, on the CPU) with the FMA softmax step (the work tree), against
# the FMA alone (.ab/fma). The attention kernel tests and the bf16 quality tests, beside the engine's float32
# equivalences on CUDA; then bench attention in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
(TESTS_PARTS=engine timeout 420 bash scripts/device/hotpath.sh tests > $OUT/engine_stage.log 2>&1) &
timeout 420 python3 -m pytest -q -rP -p no:cacheprovider tests/kernels/test_attention_kernels.py \
  tests/models/test_quality_gpu.py > $OUT/attention_tests.log 2>&1
echo "attention tests: $(tail -1 $OUT/attention_tests.log) ($SECONDS s)"; grep -E '^(FAILED|ERROR)' $OUT/attention_tests.log | head
grep -E '^\| (alone|graphs: alone|whole)' $OUT/attention_tests.log | head -6
wait
echo "engine: $(grep engine_tests_on_gpu: $OUT/engine_stage.log) ($SECONDS s)"; grep -E '^(FAILED|ERROR)' $OUT/engine_tests_on_gpu.log | head
AB_SKIP_TESTS=1 AB_RUNS="new fma new fma" timeout 120 bash scripts/device/hotpath.sh ab-attention > /dev/null 2>&1
echo "bench rc $? ($SECONDS s)"
awk '/^-- /{print} NF==8 && $1 ~ /^[0-9]+$/ {print}' $OUT/ab_attention.txt
