#!/bin/bash
# Call 8 (2026-12-01 fourth session): sliding layers' prefill on one stage (the work tree) against e75b243 (.ab/e75)
# in turns, bench attention's prefill points (gpt-oss); the attention kernel tests on CUDA.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
for round in 1 2; do
  for tree in new e75; do
    src=$PWD/src; [ $tree = e75 ] && src=$PWD/.ab/e75/src
    PYTHONPATH=/tmp/site:$src timeout 60 python3 -m quickmoe bench attention --batches 1 --contexts 1024 --windows 0,128 \
      --json $OUT/attn_${tree}_r$round.json > $OUT/attn_${tree}_r$round.log 2>&1
    echo "attention $tree round $round rc $? ($SECONDS s)"
  done
done
for f in $OUT/attn_*.log; do echo "== $f"; grep -A9 '^prefill (' $f | grep -v '^prefill (' | grep -v "batch"; done
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_attention_kernels.py \
  > $OUT/attention_tests.log 2>&1
echo "attention tests: $(tail -1 $OUT/attention_tests.log) ($SECONDS s)"
