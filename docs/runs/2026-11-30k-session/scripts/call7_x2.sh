#!/usr/bin/env bash
# Session 2026-11-30k call 7 (nvidia-h200-x2): GPU tests. GPU 0: the kernel warm-up, warm-up steps (9b5046d's fix, first
# run on a GPU) and kernel cache tests in one pytest process, on the re-tuned H200 files; GPU 1: the engine on CUDA.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
export PYTHONPATH=/tmp/site:$PWD/src
( CUDA_VISIBLE_DEVICES=0 QUICKMOE_CACHE_DIR=/tmp/qc0 QUICKMOE_TEST_DEVICE=cuda timeout -k 5 300 python3 -m pytest -q -rA \
    -p no:cacheprovider -m gpu tests/models/test_kernel_warmup.py tests/models/test_warmup_steps.py \
    tests/models/test_kernel_cache.py > "$OUT/tests0.txt" 2>&1
  echo "tests0: exit $? at $(( $(date +%s) - t0 )) s: $(tail -1 $OUT/tests0.txt)" >> "$OUT/summary.txt" ) &
p=$!
CUDA_VISIBLE_DEVICES=1 QUICKMOE_CACHE_DIR=/tmp/qc1 QUICKMOE_TEST_DEVICE=cuda timeout -k 5 300 python3 -m pytest -q -rA \
  -p no:cacheprovider tests/models/test_engine.py tests/models/test_cuda_graphs.py > "$OUT/tests1.txt" 2>&1
echo "tests1: exit $? at $(( $(date +%s) - t0 )) s: $(tail -1 $OUT/tests1.txt)" >> "$OUT/summary.txt"
wait $p
grep -hE "^(FAILED|ERROR|PASSED)" "$OUT"/tests*.txt | cut -c1-160 | head -60 >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
