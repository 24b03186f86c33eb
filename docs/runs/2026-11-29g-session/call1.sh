#!/usr/bin/env bash
# Session 2026-11-29g, call 1 (issues 18, 15): weight tiles by TMA for packed FP4 (NVFP4) at prefill sizes, with
# GEMM 1 in two dots or (new) one dot of a whole gate/up group's block: the TMA tests on CUDA, then
# moe_config_sweep.py --around-tuned --weight-tma 0,1 for NVFP4 Mixtral and Qwen3 at T = 2,048 and 8,192.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 100 python3 -m pytest -q -p no:cacheprovider \
  tests/kernels/test_fused_moe_quantized.py::test_weight_tiles_by_tma_give_the_same_bits \
  tests/kernels/test_fused_moe_quantized.py::test_weight_tma_with_one_dot_refuses_what_one_block_cannot_hold \
  tests/kernels/test_fused_moe.py::test_mxfp4_weight_tiles_by_tma_give_the_pointer_loads_bits \
  > "$OUT/tma_tests.log" 2>&1
echo "tests: $(tail -1 "$OUT/tma_tests.log") ($SECONDS s)"; grep -E '^(FAILED|ERROR)' "$OUT/tma_tests.log" | head
sweep() {  # sweep NAME ARGS...
  local name=$1; shift
  [ $SECONDS -gt 480 ] && { echo "skipped $name: $SECONDS s gone"; return; }
  timeout $((545 - SECONDS)) python3 scripts/probes/moe_config_sweep.py "$@" --around-tuned --weight-tma 0,1 --top 8 \
    --json "$OUT/$name.json" > "$OUT/$name.txt" 2>&1
  echo "== $name exit $? ($SECONDS s)"; grep -E "tuned|^  " "$OUT/$name.txt" | head -48
}
sweep mx_nvfp4 --shape mixtral-8x7b --format nvfp4 --tokens 8192,2048
sweep q3_nvfp4 --shape qwen3-30b-a3b --format nvfp4 --tokens 8192,2048
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
