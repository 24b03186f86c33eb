#!/bin/bash
# Call 6 (2026-11-30 seventeenth session, issue 15): the H200's batch-1 full-layer config on 2 warps: the tree's 4
# stages with the KV heads fastest, 2 stages (grid as the H100's batch 1), 3 or 6 stages, against c2d2504 (4 warps,
# 2 stages): bench generate's batch-1 step and op families (hotpath.sh ab-profile), in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
AB_RUNS="new base b1w2s2 b1w2s3k b1w2s6k base new b1w2s6k b1w2s3k b1w2s2" timeout 500 \
  bash scripts/device/hotpath.sh ab-profile > $OUT/ab_profile_stage.log 2>&1
echo "ab-profile rc $? ($SECONDS s)"
grep -E "^-- |median step|by op family \(profiler\)|_decode_split" $OUT/ab_profile.txt | \
  sed -E 's/decode at batch 1: median step ([0-9.]+) ms.*/step \1 ms/; s/(decode step at batch [0-9]+) by op family \(profiler\): ([0-9.]+) ms of kernels.*attention ([0-9.]+) ms.*/\1: kernels \2, attention \3/; s/^223.0 kernels a step.*(\b[0-9.]+ _decode_split_kernel).*/\1/'
