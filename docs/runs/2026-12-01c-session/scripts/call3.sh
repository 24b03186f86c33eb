#!/bin/bash
# Call 3 (2026-12-01 third session): prefill attention's launch by rows a program (the work tree: 8 warps capped at
# 128 registers for 128-row tiles, 4 warps and 2 stages for 64) -- Mixtral's 32-query tiles swept; Qwen3-30B-A3B
# (12 of its layers, FP8 experts) bench generate with prompts of 8,000 tokens against .ab/base (c065ca3) in turns;
# then the tests the launch touches, on CUDA: attention kernels, bf16 quality, the families' bf16 parity, the
# engine's float32 equivalences.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
Q3=/tmp/qwen3-12l-fp8
timeout 150 python3 -m quickmoe make-checkpoint $Q3 --preset qwen3-30b-a3b --weights fp8 --layers 12 -q
echo "qwen3 checkpoint rc $? ($SECONDS s)"
timeout 100 python3 scripts/probes/prefill_attention_sweep.py --heads 32,8,128 --block-q 16,32 --block-n 64 \
  --warps 4,8 --stages 2 --orders 1 --maxnreg 0,128 --json $OUT/sweep_mixtral_q32.json > $OUT/sweep_mixtral_q32.log 2>&1
echo "mixtral sweep rc $? ($SECONDS s)"; grep '^|' $OUT/sweep_mixtral_q32.log
for round in 1 2; do
  for tree in new base; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/.ab/base/src
    PYTHONPATH=/tmp/site:$src timeout 90 python3 -m quickmoe bench generate $Q3 --num-prompts 16 --input-len 8000 \
      --output-len 16 --json $OUT/q3gen8k_${tree}_r$round.json > $OUT/q3gen8k_${tree}_r$round.log 2>&1
    echo "qwen3 generate 16 x 8000 $tree round $round rc $? ($SECONDS s)"
  done
done
for f in $OUT/q3gen8k_*.log; do echo "== $f"; grep -E '^quickmoe|by step kind|mixed step .*by op' $f | cut -c1-300; done
left=$((585 - SECONDS))
timeout $left python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_attention_kernels.py \
  > $OUT/attention_tests.log 2>&1 &
timeout $left python3 -m pytest -q -rP -p no:cacheprovider tests/models/test_quality_gpu.py > $OUT/quality_tests.log 2>&1 &
timeout $left python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_parity_families.py \
  > $OUT/families_tests.log 2>&1 &
QUICKMOE_TEST_DEVICE=cuda timeout $left python3 -m pytest -q -p no:cacheprovider -n 2 --dist loadfile \
  tests/models/test_engine.py tests/models/test_cuda_graphs.py > $OUT/engine_tests.log 2>&1 &
wait
for t in attention quality families engine; do echo "$t tests: $(tail -1 $OUT/${t}_tests.log)"; \
  grep -E '^(FAILED|ERROR)' $OUT/${t}_tests.log | head -5; done; echo "($SECONDS s)"
grep -E "agree|%" $OUT/quality_tests.log | head -5
