#!/bin/bash
# Call 2 (2026-12-01 eighth session): Qwen3-30B-A3B FP8 prefill tiles with weights by TMA at 3-5 pipeline stages,
# 4 / 8 warps, 64 / 128-row tiles (the tuner's prefill grid has stages 3 only), T = 8,192 then 2,048, beside the
# tuned configs (moe_config_sweep.py: each GEMM alone in a CUDA graph).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
for t in 8192 2048; do
  timeout 270 python3 scripts/probes/moe_config_sweep.py --shape qwen3-30b-a3b --format fp8 --tokens $t \
    --block-m 64,128 --block-n 64 --block-n2 128,256 --warps 4,8 --stages 3,4,5 --swap 0 --group-m 8 --one-dot 0 \
    --weight-tma 1 --time-tuned --top 8 --json $OUT/sweep_$t.json > $OUT/sweep_$t.log 2>&1
  echo "sweep T=$t rc $? ($SECONDS s)"
  tail -30 $OUT/sweep_$t.log
done
