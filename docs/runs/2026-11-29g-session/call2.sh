#!/usr/bin/env bash
# Session 2026-11-29g, call 2 (issues 18, 15): the Mixtral FP8 shipped-config tests at T = 2,048 and 8,192 (the
# sixth session's TMA files; not reached there); where fused_moe's time goes at prefill sizes, per kernel
# (moe_kernel_split_probe.py: FP8 Qwen3 / Mixtral, NVFP4 Mixtral, MXFP4 gpt-oss-20b at T = 2,048 and 8,192); GEMM 1
# of FP8 with one dot by TMA (new) against the committed two-dot TMA entries.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 170 python3 -m pytest -q -p no:cacheprovider \
  "tests/kernels/test_fused_moe_quantized.py::test_the_shipped_tuned_configs_compute_the_reference[mixtral-8x7b-fp8-2048]" \
  "tests/kernels/test_fused_moe_quantized.py::test_the_shipped_tuned_configs_compute_the_reference[mixtral-8x7b-fp8-8192]" \
  > "$OUT/mixtral_fp8_shipped_tests.log" 2>&1
echo "shipped tests: $(tail -1 "$OUT/mixtral_fp8_shipped_tests.log") ($SECONDS s)"
grep -E '^(FAILED|ERROR)' "$OUT/mixtral_fp8_shipped_tests.log" | head
split() {  # split NAME ARGS...
  local name=$1; shift
  [ $SECONDS -gt 470 ] && { echo "skipped $name: $SECONDS s gone"; return; }
  timeout $((540 - SECONDS)) python3 scripts/probes/moe_kernel_split_probe.py "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name exit $? ($SECONDS s)"; grep -v "^\[transformers\]" "$OUT/$name.txt" | head -60
}
split split_fp8 --shapes qwen3-30b-a3b,mixtral-8x7b --tokens 2048,8192 --format fp8
split split_nvfp4 --shapes mixtral-8x7b --tokens 2048,8192 --format nvfp4
split split_mxfp4 --shapes gpt-oss-20b --tokens 2048,8192 --format mxfp4
if [ $SECONDS -lt 440 ]; then
  timeout $((545 - SECONDS)) python3 scripts/probes/moe_config_sweep.py --shape qwen3-30b-a3b --format fp8 \
    --tokens 8192,2048 --around-tuned --weight-tma 1 --gemms 1 --top 8 --json "$OUT/q3_fp8_onedot_tma.json" \
    > "$OUT/q3_fp8_onedot_tma.txt" 2>&1
  echo "== q3_fp8_onedot_tma exit $? ($SECONDS s)"; grep -E "tuned|^  " "$OUT/q3_fp8_onedot_tma.txt"
fi
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
