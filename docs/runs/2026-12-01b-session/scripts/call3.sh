#!/bin/bash
# Call 3 (2026-12-01 second session, issue 15): the H200's one split at 32 sequences (cd1134e) end to end: bench
# generate 32 x 1000 -> 1000 (the decode graph of batch 32) against the rule before (.ab/base = ca71818's src), in
# turns; its tests on CUDA (attention kernels, bf16 quality); bench attention's default grid on HEAD; the mixed-step
# profile on fresh prompts at 64 x 1000 -> 64.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
CKPT=/tmp/gpt-oss-20b
timeout 120 python3 -m quickmoe make-checkpoint $CKPT --preset gpt-oss-20b -q; echo "checkpoint ($SECONDS s)"
for round in 1 2; do
  for tree in new base; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/.ab/base/src
    PYTHONPATH=/tmp/site:$src timeout 90 python3 -m quickmoe bench generate $CKPT --num-prompts 32 --input-len 1000 \
      --output-len 1000 --json $OUT/gen32_${tree}_r$round.json > $OUT/gen32_${tree}_r$round.log 2>&1
    echo "generate 32 $tree round $round rc $? ($SECONDS s)"
  done
done
for f in $OUT/gen32_*.log; do echo "== $f"; grep -E '^quickmoe|by step kind|at batch 32 by op' $f | cut -c1-250; done
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_attention_kernels.py \
  > $OUT/attention_tests.log 2>&1 &
timeout 200 python3 -m pytest -q -rP -p no:cacheprovider tests/models/test_quality_gpu.py > $OUT/quality_tests.log 2>&1
wait
echo "attention_tests: $(tail -1 $OUT/attention_tests.log); quality_tests: $(tail -1 $OUT/quality_tests.log) ($SECONDS s)"
timeout 120 python3 -m quickmoe bench attention --json $OUT/bench_attention.json > $OUT/bench_attention.log 2>&1
echo "attention rc $? ($SECONDS s)"; grep -v INFO $OUT/bench_attention.log | tail -40
timeout $((590 - SECONDS)) python3 -m quickmoe bench generate $CKPT --num-prompts 64 --input-len 1000 --output-len 64 \
  --json $OUT/gen64.json > $OUT/gen64.log 2>&1
echo "generate 64 rc $? ($SECONDS s)"; grep -E 'by op family' $OUT/gen64.log | cut -c1-300
