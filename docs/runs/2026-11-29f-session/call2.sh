#!/usr/bin/env bash
# Session 2026-11-29f, call 2 (issue 18): the weight tiles by TMA (config weight_tma) for the FP8 (and bf16) MoE GEMMs
# at prefill sizes: the kernel tests on CUDA, then moe_config_sweep.py --around-tuned --weight-tma 0,1 per shape.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe_quantized.py -k "tma or (shipped and 8192 and fp8)" \
  > "$OUT/tma_tests.log" 2>&1
echo "tests: $(tail -1 "$OUT/tma_tests.log")"; grep -E '^(FAILED|ERROR)' "$OUT/tma_tests.log" | head
sweep() {  # sweep NAME ARGS...
  local name=$1; shift
  [ $SECONDS -gt 470 ] && { echo "skipped $name: $SECONDS s gone"; return; }
  timeout $((540 - SECONDS)) python3 scripts/probes/moe_config_sweep.py "$@" --around-tuned --weight-tma 0,1 --top 8 \
    --json "$OUT/$name.json" > "$OUT/$name.txt" 2>&1
  echo "== $name exit $? ($SECONDS s)"; grep -E "tuned|^  " "$OUT/$name.txt" | head -40
}
sweep mx_fp8 --shape mixtral-8x7b --format fp8 --tokens 8192,2048 --stages-around 3,4
sweep q3_fp8 --shape qwen3-30b-a3b --format fp8 --tokens 8192,2048 --stages-around 3,4
sweep mx_bf16 --shape mixtral-8x7b --format bf16 --tokens 8192 --stages-around 3
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
