#!/usr/bin/env bash
# call 7 (nvidia-h200): dense_gemm's part length 1024 / 512 / 256 in turns (kernel probe only)
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout -k 5 170 python3 .ab/parts_probe.py 2>&1 | tee "$OUT/parts_probe.txt" | grep -v Warning
