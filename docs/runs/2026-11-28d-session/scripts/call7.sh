#!/usr/bin/env bash
# Session 2026-11-28d, call 7 (H200): the final tree (NVFP4 in mma-pair order + the H200's Mixtral NVFP4 prefill
# entries from call 6) vs base (HEAD: checkpoint nibble order, H100 entries): the GPU tests of the NVFP4/FP8 kernels
# and the shipped configs at model size, then bench moe in turns.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 230 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe_quantized.py \
  tests/kernels/test_moe_configs.py tests/models/test_parity_families.py > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests: $(tail -1 "$OUT/gpu_tests.log")"; grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests.log" | head
first=1
for run in new base new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  baselines=--no-baselines; [ $first = 1 ] && baselines=; first=0
  { echo "-- $run $(date +%T)"; PYTHONPATH=/tmp/site:$root/src timeout 80 python3 -m quickmoe bench moe \
      --shapes mixtral-8x7b --formats nvfp4 --tokens 1,1024,2048,4096,8192 $baselines 2>&1 | grep -v INFO; } \
      | tee -a "$OUT/ab_bench_moe_nvfp4.txt"
done
echo "== done $(date +%T)"
