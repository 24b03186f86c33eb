#!/usr/bin/env bash
# Session 2026-11-28d, call 5 (H200): NVFP4 experts in MXFP4's mma-pair order (decode by shifts and masks, like
# MXFP4) vs base (HEAD: checkpoint nibble order, prmt tables). GPU tests first, then bench moe in turns.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe_quantized.py \
  tests/kernels/test_mxfp4_mma_pairs.py tests/kernels/test_mxfp4_ptx_decode.py tests/unit/test_quantized_layouts.py \
  > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests: $(tail -1 "$OUT/gpu_tests.log")"; grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests.log" | head
first=1
for run in new base new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  baselines=--no-baselines; [ $first = 1 ] && baselines=; first=0
  { echo "-- $run $(date +%T)"; PYTHONPATH=/tmp/site:$root/src timeout 110 python3 -m quickmoe bench moe \
      --shapes qwen3-30b-a3b,mixtral-8x7b --formats nvfp4 --tokens 1,16,1024,2048,8192 $baselines 2>&1 | grep -v INFO; } \
      | tee -a "$OUT/ab_bench_moe_nvfp4.txt"
done
echo "== done $(date +%T)"
