#!/usr/bin/env bash
# Session 2026-11-28d, call 8 (H200): the final tree's MXFP4 path (its PTX text now shares its shifts and masks
# with NVFP4's): the MoE kernel tests on CUDA, the NVFP4 quantized layouts through the model on CUDA, and bench moe
# for gpt-oss-20b at decode and prefill sizes.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe.py tests/kernels/test_mxfp4_mma_pairs.py \
  tests/kernels/test_mxfp4_ptx_decode.py tests/models/test_moe_kernels_in_model.py > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests: $(tail -1 "$OUT/gpu_tests.log")"; grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests.log" | head
timeout 60 python3 -m quickmoe bench moe --shapes gpt-oss-20b --tokens 1,16,256,8192 --no-baselines 2>&1 | grep -v INFO \
  | tee "$OUT/bench_moe_20b.txt"
echo "== done $(date +%T)"
