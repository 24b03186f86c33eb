#!/bin/bash
# Call 1 (2026-12-01 third session): bench generate on the current tree (c065ca3 moved its op-family profiles onto
# EngineStepProfile, checked on the CPU only), then prefill attention on 8 warps with the registers capped (maxnreg:
# two programs of 8 warps an SM instead of two of 4) beside the committed launch.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
timeout 300 bash scripts/device/hotpath.sh generate > $OUT/hotpath_generate.log 2>&1
echo "hotpath generate rc $? ($SECONDS s)"
grep -E '^quickmoe|by op family|throughput run|decode at batch 1' $OUT/bench_generate.log | cut -c1-330
timeout $((580 - SECONDS)) python3 scripts/probes/prefill_attention_sweep.py --block-q 16 --block-n 64,128 --warps 8 \
  --stages 2,3,4 --orders 1 --maxnreg 0,120,128 --json $OUT/prefill_sweep.json > $OUT/prefill_sweep.log 2>&1
echo "prefill sweep rc $? ($SECONDS s)"; tail -25 $OUT/prefill_sweep.log
