#!/bin/bash
# Call 5 (2026-12-01 second session): the compile workers' pool moved to executor/compile_pool.py (c1aa38c): the
# kernel precompile on an empty kernel cache (bench generate 64 x 1000 -> 64 on a fresh machine), then its GPU tests.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
CKPT=/tmp/gpt-oss-20b
timeout 120 python3 -m quickmoe make-checkpoint $CKPT --preset gpt-oss-20b -q; echo "checkpoint ($SECONDS s)"
timeout 200 python3 -m quickmoe bench generate $CKPT --num-prompts 64 --input-len 1000 --output-len 64 \
  --json $OUT/gen64.json > $OUT/gen64.log 2>&1
echo "generate rc $? ($SECONDS s)"; grep -E 'kernel_precompile|precompile  |^quickmoe|by op family' $OUT/gen64.log | cut -c1-260
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 2 tests/models/test_kernel_precompile.py \
  tests/models/test_compile.py tests/unit/test_compile_workers.py > $OUT/precompile_tests.log 2>&1
echo "precompile tests: $(tail -1 $OUT/precompile_tests.log) ($SECONDS s)"; grep -E '^(FAILED|ERROR)' $OUT/precompile_tests.log | head
