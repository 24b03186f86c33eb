#!/bin/bash
# Call 6 (2026-11-30 eighteenth session, issue 15): the FMA softmax step with windowed key tiles on multiples of 64
# (the work tree: query tiles where they were; a row meets its keys in the same tiles chunked or whole, and masked
# and whole tiles round alike) against the FMA alone (.ab/fma); .ab/qalign (query tiles on multiples of 16) read
# 3-4% slower than .ab/fma in call 5. The attention kernel tests (the chunked-vs-whole bits test in bf16) and the bf16
# quality tests beside the engine float32 equivalences on CUDA; then bench attention in turns.
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
