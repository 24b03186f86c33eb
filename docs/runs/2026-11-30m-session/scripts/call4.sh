#!/usr/bin/env bash
# Session 2026-11-30m call 4 (nvidia-h200-x2): gpt-oss-120b's H200 key 1,024 on the register-operand pair of 64 rows
# with two K steps a stage (the stage's weights one box of 64 bytes a row), its Triton tiles moved to a new key 2,048
# (.ab/k1024), against the work tree. GPU 1: bench moe 120b T = 768-2,560, k1024 / new / k1024 / new. GPU 0: the
# shipped-config tests of the 120b at 1,024 and 2,048 on k1024, then the engine's CUDA-graph, warm-up and precompile
# GPU tests on the work tree; then bench moe new / k1024.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
moe() {  # tree gpu shape tokens
  local tree=$1 gpu=$2 shape=$3 tokens=$4 root=$PWD s=$(date +%s); [ "$tree" != new ] && root=$PWD/.ab/$tree
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 10 150 \
    python3 -m quickmoe bench moe --shapes $shape --formats mxfp4 --tokens $tokens --no-baselines \
    > "$OUT/moe_${shape}_$tree.log" 2>&1
  echo "-- bench moe $shape $tree gpu $gpu: exit $? in $(( $(date +%s) - s )) s: $(grep -E "^gpt-oss.*mxfp4 +[0-9]" "$OUT/moe_${shape}_$tree.log" | awk '{print $3, $5}' | paste -sd' ')" >> "$OUT/moe_summary.txt"
  cat "$OUT/moe_${shape}_$tree.log" >> "$OUT/moe_${shape}_${tree}_all.log"; rm "$OUT/moe_${shape}_$tree.log"
}
T=768,1024,1280,1536,2048,2560
( CUDA_VISIBLE_DEVICES=0 PYTHONPATH=/tmp/site:$PWD/.ab/k1024/src timeout -k 5 150 python3 -m pytest -q -m gpu \
    tests/kernels/test_fused_moe_quantized.py -k "shipped and gpt-oss-120b" > "$OUT/tests_k1024.txt" 2>&1
  echo "tests k1024 shipped 120b: exit $? $(tail -1 $OUT/tests_k1024.txt)" >> "$OUT/summary.txt"
  CUDA_VISIBLE_DEVICES=0 timeout -k 5 260 python3 -m pytest -q -m gpu tests/models/test_cuda_graphs.py \
    tests/models/test_warmup_steps.py tests/models/test_kernel_warmup.py tests/models/test_kernel_precompile.py \
    > "$OUT/tests_models.txt" 2>&1
  echo "tests models: exit $? $(tail -1 $OUT/tests_models.txt)" >> "$OUT/summary.txt" ) &
p=$!
moe k1024 1 gpt-oss-120b $T; moe new 1 gpt-oss-120b $T; moe k1024 1 gpt-oss-120b $T; moe new 1 gpt-oss-120b $T
wait $p
grep -hE "^(FAILED|ERROR)" "$OUT"/tests_*.txt | cut -c1-300 | head >> "$OUT/summary.txt"
[ $(( $(date +%s) - t0 )) -lt 380 ] && { moe new 0 gpt-oss-120b $T & p=$!; moe k1024 1 gpt-oss-120b $T; wait $p; }
cat "$OUT/moe_summary.txt" >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
