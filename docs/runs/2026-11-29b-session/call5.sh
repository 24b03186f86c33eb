#!/usr/bin/env bash
# Session 2026-11-29b, call 5: the H200's decode config (2 warps, 6 stages at 9-512 programs) on the committed tree:
# kernel and loader tests on CUDA, whether the no-bit test's contexts tell 2 warps from 4, and bench attention.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
git log --oneline -1 > "$OUT/tree.txt" 2>/dev/null
python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_kernels.py tests/unit/test_batched_memcpy.py \
  tests/unit/test_loader.py > "$OUT/tests.log" 2>&1
echo "tests: $(tail -1 "$OUT/tests.log")"; grep -E '^(FAILED|ERROR)' "$OUT/tests.log" | head
PYTHONPATH=$PYTHONPATH:$PWD python3 .ab/mixcheck.py 2>&1 | grep -v Warning | tee "$OUT/mixcheck.txt"
python3 -m quickmoe bench attention --json "$OUT/bench_attention.json" > "$OUT/bench_attention.txt" 2>&1
echo "bench attention: exit $?"; grep -v INFO "$OUT/bench_attention.txt" | tail -40
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls
