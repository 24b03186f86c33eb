#!/bin/bash
# session 2026-11-29 tenth, call 4: the final tree (NVFP4 scales one K step ahead, Mixtral NVFP4 keys 1,024-2,048
# re-tuned): the shipped-config tests at the new keys, then bench moe on both SiLU shapes, every format, baselines
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
Q=tests/kernels/test_fused_moe_quantized.py
S=$Q::test_the_shipped_tuned_configs_compute_the_reference
timeout 150 python3 -m pytest -q -p no:cacheprovider "$S[mixtral-8x7b-nvfp4-1024]" "$S[mixtral-8x7b-nvfp4-1536]" \
  "$S[mixtral-8x7b-nvfp4-2048]" "$S[mixtral-8x7b-nvfp4-4096]" "$S[qwen3-30b-a3b-nvfp4-8192]" > $OUT/tests.txt 2>&1
echo "tests: $(tail -1 $OUT/tests.txt) ($SECONDS s)"
timeout 480 python3 -m quickmoe bench moe --shapes mixtral-8x7b,qwen3-30b-a3b \
  --tokens 1,4,16,64,256,1024,1280,2048,4096,8192 -q --json $OUT/bench_moe.json > $OUT/bench_moe.txt 2>&1
echo "-- bench moe exit $? ($SECONDS s)"
grep -E '^(bench|shape|qwen3|mixtral)' $OUT/bench_moe.txt
cd $OUT && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz .
