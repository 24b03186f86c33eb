#!/bin/bash
# Call 7 (2026-12-01 third session): decode attention's H200 config for heads of 128 (2 warps, 4 stages, KV heads
# fastest) -- Qwen3-30B-A3B (12 of its layers, FP8 experts) bench generate 256 x 1000 -> 256 against .ab/dc85 (the
# prefill change only) in turns; the attention kernel tests and the families' bf16 parity on CUDA; bench attention's
# default grid (gpt-oss) on the work tree.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
Q3=/tmp/qwen3-12l-fp8
[ -f $Q3/config.json ] || timeout 150 python3 -m quickmoe make-checkpoint $Q3 --preset qwen3-30b-a3b --weights fp8 \
  --layers 12 -q
echo "qwen3 checkpoint rc $? ($SECONDS s)"
for round in 1 2; do
  for tree in new base; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/.ab/dc85/src
    PYTHONPATH=/tmp/site:$src timeout 90 python3 -m quickmoe bench generate $Q3 --num-prompts 256 --input-len 1000 \
      --output-len 256 --json $OUT/q3gen_${tree}_r$round.json > $OUT/q3gen_${tree}_r$round.log 2>&1
    echo "qwen3 generate 256 x 1000 -> 256 $tree round $round rc $? ($SECONDS s)"
  done
done
for f in $OUT/q3gen_*.log; do echo "== $f"; grep -E '^quickmoe|by step kind|at batch 256 by op|at batch 1 by op' $f \
  | cut -c1-260; done
left=$((470 - SECONDS))
timeout $left python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_attention_kernels.py \
  > $OUT/attention_tests.log 2>&1 &
timeout $left python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_parity_families.py \
  > $OUT/families_tests.log 2>&1 &
wait
for t in attention families; do echo "$t tests: $(tail -1 $OUT/${t}_tests.log)"; \
  grep -E '^(FAILED|ERROR)' $OUT/${t}_tests.log | head -5; done; echo "($SECONDS s)"
timeout $((585 - SECONDS)) python3 -m quickmoe bench attention --json $OUT/bench_attention.json \
  > $OUT/bench_attention.log 2>&1
echo "attention rc $? ($SECONDS s)"; grep -v INFO $OUT/bench_attention.log | grep -E "SDPA faster|^ +(1|4|16) +[0-9]+ +(0|128) +[0-9.]+ +[0-9.]+ +[0-9.-]+ +" | tail -12
