#!/usr/bin/env bash
# Session 2026-11-28e, call 1 (H200): the L2 prefetch probe (does the next layer's QKV weight asked of L2 during
# the batch-1 MoE make the projection faster?), then the families' GPU tests (NVFP4 in mma-pair order through
# the model on CUDA; not run since b8aa3b8).
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 240 python3 scripts/probes/l2_prefetch_probe.py --json "$OUT/l2_prefetch_probe.json" 2>&1 | tee "$OUT/l2_prefetch_probe.log"
timeout 280 python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_parity_families.py \
  tests/kernels/test_fused_moe_quantized.py > "$OUT/families_gpu_tests.log" 2>&1
echo "families gpu tests: $(tail -1 "$OUT/families_gpu_tests.log")"; grep -E "^(FAILED|ERROR)" "$OUT/families_gpu_tests.log" | head
echo "== done $(date +%T)"
