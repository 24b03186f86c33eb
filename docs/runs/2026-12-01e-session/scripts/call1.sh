#!/bin/bash
# Call 1 (2026-12-01 fifth session): the GPU tests left from the fourth session on the final tree 27f3d82 (attention
# kernel tests, the engine's float32 equivalences on CUDA, the families' bf16 parity, then the bf16 quality tests),
# then the Gluon prefill probe (K/V ring a whole step ahead) against the Triton kernel and SDPA.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_attention_kernels.py \
  > $OUT/attention_tests.log 2>&1 &
QUICKMOE_TEST_DEVICE=cuda timeout 200 python3 -m pytest -q -p no:cacheprovider -n 2 --dist loadfile \
  tests/models/test_engine.py tests/models/test_cuda_graphs.py > $OUT/engine_tests.log 2>&1 &
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_parity_families.py \
  > $OUT/families_tests.log 2>&1 &
wait
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_quality_gpu.py -rA \
  > $OUT/quality_tests.log 2>&1
for round in 1 2; do
  timeout 120 python3 scripts/probes/gluon_prefill_probe.py --stages 2,3 --json $OUT/gluon_prefill_r$round.json \
    > $OUT/gluon_prefill_r$round.log 2>&1
  echo "gluon round $round rc $? ($SECONDS s)"
done
for t in attention engine families quality; do echo "$t tests: $(tail -1 $OUT/${t}_tests.log)"; \
  grep -E '^(FAILED|ERROR)' $OUT/${t}_tests.log | head -5; done
grep -iE "agree|%" $OUT/quality_tests.log | head -6
tail -25 $OUT/gluon_prefill_r1.log; tail -12 $OUT/gluon_prefill_r2.log; echo "($SECONDS s)"
