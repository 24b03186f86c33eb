#!/usr/bin/env bash
# Session 2026-11-28e, call 4 (H200): the FP8 GEMM 1 epilogue branch (next/fp8-quantized-gemm1-epilogue, 4f7b168)
# against main. Trees in .ab/: base = main (6fddc10) as is (H100 FP8 files borrowed: GEMM 1 on 4 warps at
# T >= 2048), base8 = main with H200 FP8 files whose GEMM 1 takes 8 warps at T >= 2048, epi = the branch with those
# files (8 warps: the epilogue quantizes). First the branch's new test and the FP8 kernel tests on CUDA, then
# bench moe in turns.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
(cd .ab/epi && PYTHONPATH=/tmp/site:$PWD/src timeout 200 python3 -m pytest -q -p no:cacheprovider \
  tests/kernels/test_fused_moe_quantized.py > "$OUT/epi_gpu_tests.log" 2>&1)
echo "epi tests: $(tail -1 "$OUT/epi_gpu_tests.log")"; grep -E "^(FAILED|ERROR)" "$OUT/epi_gpu_tests.log" | head
for run in base epi base8 base epi base8; do
  { echo "-- $run"
    PYTHONPATH=/tmp/site:$PWD/.ab/$run/src timeout 150 python3 -m quickmoe bench moe --shapes qwen3-30b-a3b,mixtral-8x7b \
      --formats fp8 --tokens 2048,8192 --no-baselines 2>&1 | grep -v INFO; } | tee -a "$OUT/ab_bench_moe_fp8.txt"
done
echo "== done $(date +%T)"
