#!/usr/bin/env bash
# Session 2026-11-29g, call 3 (issue 18): the FP8 activation quantizer took 159 of Qwen3-30B-A3B FP8's 1,180 us at
# T = 8,192 (call 2); variants that each change one thing, timed and their bits checked
# (scripts/probes/fp8_quant_variants_probe.py).
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 400 python3 scripts/probes/fp8_quant_variants_probe.py --json "$OUT/quant_variants.json" 2>&1 \
  | tee "$OUT/quant_variants.txt"
echo "exit $? ($SECONDS s)"
