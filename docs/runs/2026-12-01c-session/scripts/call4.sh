#!/bin/bash
# Call 4 (2026-12-01 third session): Mixtral's prefill launch (32 / 8 heads of 128: 64-row tiles at 16 queries a
# program) with 32 queries a program (128 rows, as gpt-oss's and Qwen3's tiles), 4 or 8 warps, capped or not.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
timeout 300 python3 scripts/probes/prefill_attention_sweep.py --heads 32,8,128 --block-q 16,32 --block-n 64 \
  --warps 4,8 --stages 2,3 --orders 1 --maxnreg 0,128 --json $OUT/sweep_mixtral_q32.json > $OUT/sweep_mixtral_q32.log 2>&1
echo "mixtral sweep rc $? ($SECONDS s)"; grep '^|' $OUT/sweep_mixtral_q32.log; tail -3 $OUT/sweep_mixtral_q32.log
