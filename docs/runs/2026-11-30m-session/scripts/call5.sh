#!/usr/bin/env bash
# Session 2026-11-30m call 5 (nvidia-h200-x2): the work tree as committed (the stage's weights one box of 64 bytes a
# row at 64-row tiles; gpt-oss-120b's H200 key 1,024 on the register-operand pair of 64 rows, two steps a stage, its
# Triton tiles at a new key 1,536) against 3aa5711 (.ab/base). GPU 0: the precompile GPU test alone (call 4 ran it in
# one pytest process after the CUDA-graph tests, whose KV caches left it 13 GiB), then the shipped-config tests of the
# 120b. GPU 1: bench moe 120b T = 768-2,560, new / base / new / base.
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
( CUDA_VISIBLE_DEVICES=0 timeout -k 5 200 python3 -m pytest -q -m gpu tests/models/test_kernel_precompile.py \
    > "$OUT/tests_precompile.txt" 2>&1
  echo "tests precompile: exit $? $(tail -1 $OUT/tests_precompile.txt)" >> "$OUT/summary.txt"
  CUDA_VISIBLE_DEVICES=0 timeout -k 5 100 python3 -m pytest -q -m gpu tests/kernels/test_fused_moe_quantized.py \
    -k "shipped and gpt-oss-120b" > "$OUT/tests_shipped.txt" 2>&1
  echo "tests shipped 120b: exit $? $(tail -1 $OUT/tests_shipped.txt)" >> "$OUT/summary.txt" ) &
p=$!
moe new 1 gpt-oss-120b $T; moe base 1 gpt-oss-120b $T; moe new 1 gpt-oss-120b $T; moe base 1 gpt-oss-120b $T
wait $p
grep -hE "^(FAILED|ERROR)|^E  " "$OUT"/tests_*.txt | cut -c1-300 | head -20 >> "$OUT/summary.txt"
cat "$OUT/moe_summary.txt" >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
