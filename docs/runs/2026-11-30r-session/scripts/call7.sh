#!/bin/bash
# Call 7 (2026-11-30 eighteenth session, issue 15): the query-aligned prefill with keys before a chunk's first window
# masked in masked tiles (the work tree) against call 5's tree (.ab/qalign): bench attention once each, then the
# prefill kernel tests on CUDA (bf16 chunked-vs-whole bits, released blocks).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
AB_SKIP_TESTS=1 AB_RUNS="new qalign" timeout 60 bash scripts/device/hotpath.sh ab-attention > /dev/null 2>&1
echo "bench rc $? ($SECONDS s)"
awk '/^-- /{print} NF==8 && $1 ~ /^[0-9]+$/ {print}' $OUT/ab_attention.txt
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_kernels.py -k prefill \
  > $OUT/prefill_tests.log 2>&1
echo "prefill tests: $(tail -1 $OUT/prefill_tests.log) ($SECONDS s)"; grep -E '^(FAILED|ERROR)' $OUT/prefill_tests.log | head
