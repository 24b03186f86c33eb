#!/bin/bash
# Call 2 (2026-12-02 session): the FP8 MoE GEMV, second version (activations quantized by the quantizer launch, K
# loops unrolled, no in-kernel division): its tests and the FP8 fused_moe tests on CUDA, then fp8_gemv_probe.py
# (rows 8-64, warps 1-8; stages do not apply to unrolled loops without pipelined loads).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 170 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_fp8_gemv.py \
  tests/kernels/test_fused_moe_quantized.py -k "fp8 or gemv" > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s)"; tail -3 $OUT/tests.log
timeout 390 python3 scripts/probes/fp8_gemv_probe.py --rows 8,16,32,64 --warps 1,2,4,8 --stages 3 \
  --json $OUT/probe.json > $OUT/probe.log 2>&1
echo "probe rc $? ($SECONDS s)"
grep -E "^\||best rows|failed|wrong" $OUT/probe.log | cut -c1-200
