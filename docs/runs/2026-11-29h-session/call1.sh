#!/usr/bin/env bash
# Session 2026-11-29h, call 1 (issue 18, Qwen3 FP8 decode): the FP8 dense GEMM with K in parts and the quantizer
# inside: its tests on CUDA (and the quantizer's, whose rounding moved into a shared helper), the quantizer tiles
# probe, then the probe's sweep at decode sizes.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fp8_gemm.py tests/unit/test_fp8_nvfp4.py \
  tests/kernels/test_fused_moe_quantized.py::test_fp8_activation_quantizer_is_bit_exact \
  tests/kernels/test_fused_moe_quantized.py::test_the_quantizer_launch_never_gives_a_thread_2_values \
  > "$OUT/tests.log" 2>&1
echo "tests: $(tail -1 "$OUT/tests.log") ($SECONDS s)"; grep -E '^(FAILED|ERROR)' "$OUT/tests.log" | head
timeout 120 python3 scripts/probes/fp8_quant_tiles_probe.py --json "$OUT/quant_tiles.json" > "$OUT/quant_tiles.txt" 2>&1
echo "tiles probe exit $? ($SECONDS s)"; tail -4 "$OUT/quant_tiles.txt"
timeout $((540 - SECONDS)) python3 scripts/probes/fp8_gemm_probe.py --tokens 1,4,16,64 --sweep \
  --json "$OUT/fp8_gemm_sweep.json" > "$OUT/fp8_gemm_sweep.txt" 2>&1
echo "sweep exit $? ($SECONDS s)"
grep -v skipped "$OUT/fp8_gemm_sweep.txt" | tail -70
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
