#!/bin/bash
# Call 1 (2026-12-02 session): the FP8 MoE GEMV (kernels/moe_fp8_gemv.py, work tree): its tests and the FP8 fused_moe
# tests on CUDA, then scripts/probes/fp8_gemv_probe.py (the GEMV against the tensor-core path, Qwen3 and Mixtral
# shapes, T = 1-8, 8 layers' experts, a launch sweep).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout 170 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_moe_fp8_gemv.py \
  tests/kernels/test_fused_moe_quantized.py -k "fp8 or gemv" > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s)"; tail -3 $OUT/tests.log
timeout 390 python3 scripts/probes/fp8_gemv_probe.py --json $OUT/probe.json > $OUT/probe.log 2>&1
echo "probe rc $? ($SECONDS s)"
grep -E "^\||best rows|failed|wrong" $OUT/probe.log | cut -c1-200
