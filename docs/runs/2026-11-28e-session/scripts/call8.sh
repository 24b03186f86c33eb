#!/usr/bin/env bash
# Session 2026-11-28e, call 8 (H200): the tuned MoE configs of this session (the H200's FP8 and NVFP4 files) at
# model size against the float64 reference, then issue 16's cold start on gpt-oss-20b against the import floor.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe_quantized.py -k shipped \
  > "$OUT/shipped_config_tests.log" 2>&1
echo "shipped-config tests: $(tail -1 "$OUT/shipped_config_tests.log")"; grep -E "^(FAILED|ERROR)" "$OUT/shipped_config_tests.log" | head
start=$SECONDS; python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q; echo "made in $((SECONDS - start)) s"
timeout 200 python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 3 --device cuda --import-floor 2>&1 | grep -v INFO \
  | tee "$OUT/coldstart_20b.txt" | tail -30
echo "== done $(date +%T)"
