#!/bin/bash
# Call 4 (2026-11-30 seventeenth session, issue 15): 2 warps at every batch size on the H200? A row's bits would then
# not depend on the batch through the warps at all (today 4 warps up to 512 programs, 2 beyond). Every 2-warp stage
# count beside the tree's 4-warp configs, gpt-oss shapes, 1-256 sequences, full layers of 1k/4k/16k keys and the
# 128-key window, twice (the spread).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
for i in 1 2; do
  timeout 270 python3 scripts/probes/decode_attention_sweep.py --batches 1,2,4,8,16,32,64,128,256 \
    --contexts 1024,4096,16384 --windows 0,128 --no-extras \
    --configs n64w2s2,n64w2s2k,n64w2s3k,n64w2s4k,n64w2s6k,n64w4s2,n64w4s3k,n64w4s5k \
    --json $OUT/sweep2w_$i.json > $OUT/sweep2w_$i.log 2>&1
  echo "sweep $i rc $? ($SECONDS s)"
done
sed -n '/| batch x context, window | default | n64/,$p' $OUT/sweep2w_1.log
sed -n '/| batch x context, window | default | n64/,$p' $OUT/sweep2w_2.log
