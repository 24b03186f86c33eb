#!/bin/bash
# Call 7 (2026-12-01 fifth session): the GPU tests on the final decode kernel (the new k and v loaded beside q):
# the attention kernel tests, the engine's float32 equivalences on CUDA, the families' bf16 parity.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_attention_kernels.py \
  > $OUT/attention_tests.log 2>&1 &
QUICKMOE_TEST_DEVICE=cuda timeout 200 python3 -m pytest -q -p no:cacheprovider -n 2 --dist loadfile \
  tests/models/test_engine.py tests/models/test_cuda_graphs.py > $OUT/engine_tests.log 2>&1 &
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_parity_families.py \
  > $OUT/families_tests.log 2>&1 &
wait
for t in attention engine families; do echo "$t tests: $(tail -1 $OUT/${t}_tests.log)"; \
  grep -E '^(FAILED|ERROR)' $OUT/${t}_tests.log | head -5; done; echo "($SECONDS s)"
