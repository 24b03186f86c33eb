#!/bin/bash
# Call 5 (2026-12-01 fourth session): prefill's whole-tile loop unrolled by 2 (the work tree; one wait for two tiles'
# K and V, the second tile's QK issued behind the first's PV) against e75b243 (.ab/e75) in turns, the sweep's
# default launch on gpt-oss, Qwen3-30B-A3B and Mixtral heads; then the GPU tests on the work tree (attention
# kernels, bf16 quality, the families' parity, the engine's float32 equivalences on CUDA).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
for round in 1 2; do
  for tree in new e75; do
    src=$PWD/src; [ $tree = e75 ] && src=$PWD/.ab/e75/src
    for shape in gptoss:64,8,64:16 qwen3:32,4,128:16 mixtral:32,8,128:32; do
      h=${shape#*:}; name=${shape%%:*}
      PYTHONPATH=/tmp/site:$src timeout 60 python3 scripts/probes/prefill_attention_sweep.py --heads ${h%:*} \
        --block-q ${h##*:} --block-n 64 --warps 8 --stages 2 --orders 1 --maxnreg 128 \
        --json $OUT/unroll_${name}_${tree}_r$round.json > $OUT/unroll_${name}_${tree}_r$round.log 2>&1
      echo "unroll $name $tree round $round rc $? ($SECONDS s)"
    done
  done
done
for f in $OUT/unroll_*.log; do echo "== $f"; grep -E '^\| \(' $f | head -2; done
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
