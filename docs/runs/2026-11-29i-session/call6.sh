#!/bin/bash
# session 2026-11-29 ninth, call 6: after the refactor (operand tiles in kernels/moe_tiles.py; the ticket helpers in
# kernels/tickets.py, used by the router, the FP8 dense GEMM and the MoE GEMMs): their tests on the GPU
source scripts/device/env.sh
F=tests/kernels/test_fused_moe.py
Q=tests/kernels/test_fused_moe_quantized.py
P=$F::test_k_in_parts_on_the_gpu_are_deterministic_and_near_one_part
S=$Q::test_the_shipped_tuned_configs_compute_the_reference
timeout 230 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_router.py tests/kernels/test_fp8_gemm.py \
  tests/kernels/test_mxfp4_ptx_decode.py "$F::test_fused_moe_gpt_oss_20b_shapes_on_the_gpu" \
  "$P[1-mxfp4]" "$P[1-bf16]" "$P[1-fp8]" "$P[1-nvfp4]" "$Q::test_quantized_experts_bf16_on_the_gpu" \
  "$S[gpt-oss-120b-mxfp4-1]" "$S[mixtral-8x7b-nvfp4-1]" "$S[qwen3-30b-a3b-fp8-1]" "$S[mixtral-8x7b-fp8-1024]" \
  > $OUT/tests.txt 2>&1
echo "rc $?"; tail -4 $OUT/tests.txt
