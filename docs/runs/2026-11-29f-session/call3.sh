#!/usr/bin/env bash
# Session 2026-11-29f, call 3 (issue 18): the H200 FP8 files with weight_tma at keys 1024-8192, in the layer:
# the shipped-config tests, then bench moe (qwen3 + mixtral, fp8, T = 1024-8192) new (with baselines) / base / new /
# base; then (issue 16) the 20b's cold start with the new defaults.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
(python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make_20b.log" 2>&1; echo "made: exit $?" >> "$OUT/make_20b.log") &
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe_quantized.py -k "shipped and fp8" \
  > "$OUT/fp8_shipped_tests.log" 2>&1
echo "tests: $(tail -1 "$OUT/fp8_shipped_tests.log") ($SECONDS s)"; grep -E '^(FAILED|ERROR)' "$OUT/fp8_shipped_tests.log" | head
bm() {  # bm NAME ROOT ARGS...
  local name=$1 root=$2; shift 2
  [ $SECONDS -gt 420 ] && { echo "skipped $name: $SECONDS s gone"; return; }
  PYTHONPATH=/tmp/site:$root/src timeout $((480 - SECONDS)) python3 -m quickmoe bench moe --shapes qwen3-30b-a3b,mixtral-8x7b \
    --formats fp8 --tokens 1024,2048,4096,8192 -q --json "$OUT/bench_moe_$name.json" "$@" > "$OUT/bench_moe_$name.txt" 2>&1
  echo "== $name exit $? ($SECONDS s)"
}
bm new_a "$PWD"
bm base_a "$PWD/.ab/base" --no-baselines
bm new_b "$PWD" --no-baselines
bm base_b "$PWD/.ab/base" --no-baselines
wait
if [ $SECONDS -lt 470 ]; then
  timeout $((560 - SECONDS)) python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 3 --device cuda --import-floor \
    --json "$OUT/cold_20b_defaults.json" > "$OUT/cold_20b_defaults.txt" 2>&1
  echo "== coldstart exit $? ($SECONDS s)"; grep -E "^(imports|build|load|process|weights_ready|total) |import torch alone|Triton" "$OUT/cold_20b_defaults.txt"
fi
cat "$OUT/bench_moe_new_a.txt" | grep -v "^$" | tail -40
for n in base_a new_b base_b; do echo "-- $n"; grep -iE "fp8" "$OUT/bench_moe_$n.txt" | head -12; done
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
