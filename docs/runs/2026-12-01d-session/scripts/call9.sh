#!/bin/bash
# Call 9 (2026-12-01 fourth session): prefill's diagonal tiles in the whole tiles' loop behind a runtime branch (the
# work tree; their K and V then come through the loop's pipeline) against 5dc77b6 (.ab/5dc) in turns, the sweep's
# default launch (full layers' 2 stages; the window points take what the sweep gives) on gpt-oss, Qwen3-30B-A3B and
# Mixtral heads; bench attention's prefill points (gpt-oss, the engine's launch); the attention kernel tests.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
for round in 1 2; do
  for tree in new 5dc; do
    src=$PWD/src; [ $tree = 5dc ] && src=$PWD/.ab/5dc/src
    for shape in gptoss:64,8,64:16 qwen3:32,4,128:16 mixtral:32,8,128:32; do
      h=${shape#*:}; name=${shape%%:*}
      [ $round = 2 ] && [ $name != gptoss ] && continue
      PYTHONPATH=/tmp/site:$src timeout 60 python3 scripts/probes/prefill_attention_sweep.py --heads ${h%:*} \
        --block-q ${h##*:} --block-n 64 --warps 8 --stages 2 --orders 1 --maxnreg 128 \
        --json $OUT/diag_${name}_${tree}_r$round.json > $OUT/diag_${name}_${tree}_r$round.log 2>&1
      echo "diag $name $tree round $round rc $? ($SECONDS s)"
    done
    PYTHONPATH=/tmp/site:$src timeout 60 python3 -m quickmoe bench attention --batches 1 --contexts 1024 \
      --windows 0,128 --json $OUT/attn_${tree}_r$round.json > $OUT/attn_${tree}_r$round.log 2>&1
    echo "attention $tree round $round rc $? ($SECONDS s)"
  done
done
for f in $OUT/diag_*.log; do echo "== $f"; grep -E '^\| \(' $f | head -2; done
for f in $OUT/attn_*.log; do echo "== $f"; grep -A9 '^prefill (' $f | grep -v '^prefill (' | grep -v "batch"; done
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_attention_kernels.py \
  > $OUT/attention_tests.log 2>&1
echo "attention tests: $(tail -1 $OUT/attention_tests.log) ($SECONDS s)"
