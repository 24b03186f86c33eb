#!/bin/bash
# Call 6 (2026-12-01 fourth session): the GPU tests on the final tree e75b243 (the attention kernel tests on the
# engine's int64 context lengths, first time on CUDA; the engine's float32 equivalences; the families' bf16 parity),
# then bench generate 256 x 1000 -> 1000 on gpt-oss-20b.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
G=/tmp/gpt-oss-20b
timeout 150 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > /dev/null 2>&1 &
timeout 250 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_attention_kernels.py \
  > $OUT/attention_tests.log 2>&1 &
timeout 250 python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_parity_families.py \
  > $OUT/families_tests.log 2>&1 &
QUICKMOE_TEST_DEVICE=cuda timeout 250 python3 -m pytest -q -p no:cacheprovider -n 2 --dist loadfile \
  tests/models/test_engine.py tests/models/test_cuda_graphs.py > $OUT/engine_tests.log 2>&1 &
wait
for t in attention families engine; do echo "$t tests: $(tail -1 $OUT/${t}_tests.log)"; \
  grep -E '^(FAILED|ERROR)' $OUT/${t}_tests.log | head -5; done; echo "($SECONDS s)"
timeout 150 python3 -m quickmoe bench generate $G --num-prompts 256 --input-len 1000 --output-len 1000 \
  --json $OUT/gen256.json > $OUT/gen256.log 2>&1
echo "generate 256 x 1000 -> 1000 rc $? ($SECONDS s)"
grep -E '^quickmoe|by step kind|by op family' $OUT/gen256.log | cut -c1-260
