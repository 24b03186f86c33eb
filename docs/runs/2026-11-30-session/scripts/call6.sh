#!/usr/bin/env bash
# Hot path call 5 (nvidia-h200): the dense GEMM's tests on CUDA (bits across configs and rows, CUDA-graph replays),
# the kernel count and the model parity GPU tests.
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 100 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_dense_gemm.py > "$OUT/dense_tests.log" 2>&1
echo "dense tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/dense_tests.log")" | tee -a "$OUT/timeline.txt"
grep -E "^(FAILED|ERROR)" "$OUT/dense_tests.log" | head
s=$(date +%s)
timeout -k 5 100 python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_kernel_count.py tests/models/test_parity.py \
  > "$OUT/model_tests.log" 2>&1
echo "kernel count + parity GPU tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/model_tests.log")" | tee -a "$OUT/timeline.txt"
grep -E "^(FAILED|ERROR)" "$OUT/model_tests.log" | head
