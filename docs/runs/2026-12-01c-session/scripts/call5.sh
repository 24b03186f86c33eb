#!/bin/bash
# Call 5 (2026-12-01 third session): prefill tiles of 128 rows for every group up to 8 (Mixtral: 32 queries x 4
# heads, 8 warps capped at 128 registers) -- Mixtral-8x7B (4 of its layers, FP8 experts) bench generate with prompts
# of 8,000 tokens against .ab/base (c065ca3) in turns; the attention kernel tests and the families' bf16 parity
# against transformers on CUDA.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
MX=/tmp/mixtral-4l-fp8
timeout 150 python3 -m quickmoe make-checkpoint $MX --preset mixtral-8x7b --weights fp8 --layers 4 -q
echo "mixtral checkpoint rc $? ($SECONDS s)"
for round in 1 2; do
  for tree in new base; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/.ab/base/src
    PYTHONPATH=/tmp/site:$src timeout 90 python3 -m quickmoe bench generate $MX --num-prompts 16 --input-len 8000 \
      --output-len 16 --json $OUT/mxgen8k_${tree}_r$round.json > $OUT/mxgen8k_${tree}_r$round.log 2>&1
    echo "mixtral generate 16 x 8000 $tree round $round rc $? ($SECONDS s)"
  done
done
for f in $OUT/mxgen8k_*.log; do echo "== $f"; grep -E '^quickmoe|by step kind|mixed step .*by op' $f | cut -c1-300; done
left=$((585 - SECONDS))
timeout $left python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_attention_kernels.py \
  > $OUT/attention_tests.log 2>&1 &
timeout $left python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_parity_families.py \
  > $OUT/families_tests.log 2>&1 &
wait
for t in attention families; do echo "$t tests: $(tail -1 $OUT/${t}_tests.log)"; \
  grep -E '^(FAILED|ERROR)' $OUT/${t}_tests.log | head -5; done; echo "($SECONDS s)"
