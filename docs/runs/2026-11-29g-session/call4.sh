#!/usr/bin/env bash
# Session 2026-11-29g, call 4 (issue 18): the FP8 activation quantizer with the conversion's rounding and tiles that
# divide a row's groups (the work tree) against 334110a (.ab/base): its tests on CUDA (bits against the reference at
# every launch rule's tile), the tiles probe, the variants probe, then bench moe FP8 in turns, and the shipped-config
# tests at model size that go through the quantizer.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fp8_gemm.py \
  tests/kernels/test_fused_moe_quantized.py::test_fp8_activation_quantizer_is_bit_exact \
  tests/kernels/test_fused_moe_quantized.py::test_the_quantizer_launch_never_gives_a_thread_2_values \
  > "$OUT/quant_tests.log" 2>&1
echo "tests: $(tail -1 "$OUT/quant_tests.log") ($SECONDS s)"; grep -E '^(FAILED|ERROR)' "$OUT/quant_tests.log" | head
timeout 120 python3 scripts/probes/fp8_quant_tiles_probe.py --json "$OUT/quant_tiles.json" > "$OUT/quant_tiles.txt" 2>&1
echo "tiles probe exit $? ($SECONDS s)"; tail -8 "$OUT/quant_tiles.txt"
timeout 60 python3 scripts/probes/fp8_quant_variants_probe.py --json "$OUT/quant_variants.json" 2>&1 | tee "$OUT/quant_variants.txt"
for turn in new_a base_a new_b base_b; do
  [ $SECONDS -gt 420 ] && { echo "stopping: $SECONDS s"; break; }
  pp=$PWD/src; [[ $turn == base* ]] && pp=$PWD/.ab/base/src
  PYTHONPATH=/tmp/site:$pp timeout 150 python3 -m quickmoe bench moe --shapes qwen3-30b-a3b,mixtral-8x7b --formats fp8 \
    --tokens 1024,2048,4096,8192 --no-baselines --json "$OUT/bench_moe_$turn.json" > "$OUT/bench_moe_$turn.txt" 2>&1
  echo "== $turn exit $? ($SECONDS s)"; grep -E "fp8|HBM" "$OUT/bench_moe_$turn.txt" | grep -v INFO
done
if [ $SECONDS -lt 470 ]; then
  timeout $((560 - SECONDS)) python3 -m pytest -q -p no:cacheprovider \
    "tests/kernels/test_fused_moe_quantized.py::test_the_shipped_tuned_configs_compute_the_reference[qwen3-30b-a3b-fp8-8192]" \
    "tests/kernels/test_fused_moe_quantized.py::test_the_shipped_tuned_configs_compute_the_reference[mixtral-8x7b-fp8-8192]" \
    "tests/kernels/test_fused_moe_quantized.py::test_the_shipped_tuned_configs_compute_the_reference[qwen3-30b-a3b-fp8-16]" \
    > "$OUT/shipped_tests.log" 2>&1
  echo "shipped tests: $(tail -1 "$OUT/shipped_tests.log") ($SECONDS s)"
fi
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
