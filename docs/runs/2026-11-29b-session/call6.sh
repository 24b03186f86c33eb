#!/usr/bin/env bash
# Session 2026-11-29b, call 6 (issue 15): decode attention's split counts at 8-64 sequences on the H200 with its
# 2-warp, 6-stage config, beside SDPA.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 scripts/probes/decode_attention_sweep.py --batches 4,8,16,32,64 --contexts 1024,4096,16384 --windows 0 \
  --configs n64w2s6k --splits 1,2,4,8,16 --no-extras --json "$OUT/splits.json" > "$OUT/splits.txt" 2>&1
grep -E "^B=|HBM|median" "$OUT/splits.txt"
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls
