#!/usr/bin/env bash
# Session 2026-11-30j call 4 (nvidia-h200-x2): the final tree's GPU tests. Both GPUs: tests/distributed/test_two_gpus.py
# (TP = 2 with the block tables as arrays in the rank message). Then GPU 0: the MoE kernel warm-up and the warm-up
# steps' GPU tests (threads, with the retry); GPU 1: the engine on CUDA and the decode graphs.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t() {  # name timeout tests...
  local name=$1 limit=$2; shift 2
  local s=$(date +%s)
  timeout -k 10 $limit python3 -m pytest -q -rA -p no:cacheprovider "$@" > "$OUT/tests_$name.log" 2>&1
  { echo "$name: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/tests_$name.log")"
    grep -E '^(FAILED|ERROR)' "$OUT/tests_$name.log" | head -10; } > "$OUT/part_$name.txt"
}
QUICKMOE_CACHE_DIR=/tmp/qc-tp t two_gpus 240 -m gpu tests/distributed/test_two_gpus.py
cat "$OUT/part_two_gpus.txt" >> "$OUT/summary.txt"
( export CUDA_VISIBLE_DEVICES=0 QUICKMOE_CACHE_DIR=/tmp/qc-0
  t warmup 420 -m gpu tests/models/test_kernel_warmup.py tests/models/test_warmup_steps.py ) &
p=$!
( export CUDA_VISIBLE_DEVICES=1 QUICKMOE_CACHE_DIR=/tmp/qc-1 QUICKMOE_TEST_DEVICE=cuda
  t engine 300 tests/models/test_engine.py tests/models/test_cuda_graphs.py tests/models/test_pinned_staging.py )
while kill -0 $p 2>/dev/null; do sleep 1; done
cat "$OUT/part_warmup.txt" "$OUT/part_engine.txt" >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
