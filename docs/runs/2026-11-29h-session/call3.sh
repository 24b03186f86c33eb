#!/usr/bin/env bash
# Session 2026-11-29h, call 3 (issue 18, Qwen3 FP8 decode): q, k and v as one FP8 GEMM and the q/k head norms in one
# kernel (the work tree) against 79fe57c (.ab/base: split-K only): tests on CUDA, the router probe for Qwen3's 128
# experts, then Qwen3-30B-A3B FP8's bench generate in turns.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_glue_kernels.py tests/models/test_kernel_count.py \
  "tests/models/test_parity_families.py::test_prefill_logits_match_transformers_cuda_bf16[qwen3-full-dense-mid]" \
  tests/models/test_parity_families.py::test_quantized_model_equals_transformers_on_the_dequantized_twin \
  > "$OUT/tests.log" 2>&1
echo "tests: $(tail -1 "$OUT/tests.log") ($SECONDS s)"; grep -E '^(FAILED|ERROR)|^E  ' "$OUT/tests.log" | head -8
timeout 90 python3 scripts/probes/router_probe.py --sweep qwen3-30b-a3b --no-dense > "$OUT/router_probe.txt" 2>&1
echo "router probe exit $? ($SECONDS s)"; grep -v '^ *$' "$OUT/router_probe.txt" | tail -25 | cut -c1-150
python3 -m quickmoe make-checkpoint /tmp/q3fp8 --preset qwen3-30b-a3b --weights fp8 -q > "$OUT/make_q3fp8.log" 2>&1
echo "checkpoint: exit $? ($SECONDS s)"
gen() {  # tree turn
  [ $SECONDS -gt 480 ] && { echo "skipping gen $1 $2: $SECONDS s gone"; return; }
  local root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  local log="$OUT/gen_q3fp8_$1_$2.log"
  PYTHONPATH=/tmp/site:$root/src timeout 110 python3 -m quickmoe bench generate /tmp/q3fp8 --num-prompts 64 \
    --input-len 1000 --output-len 64 --json "$OUT/gen_q3fp8_$1_$2.json" > "$log" 2>&1
  echo "-- gen $1 $2 exit $? ($SECONDS s)"
  grep -E '^decode at batch 1: median|^decode step at batch|^throughput run by step' "$log" | cut -c1-260
}
gen new a; gen base a; gen new b; gen base b
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
