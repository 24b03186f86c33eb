#!/bin/bash
# Call 3 (2026-11-30 seventeenth session, issue 15): with 4 warps kept up to 512 programs on the H200 (cf6fda8), which
# pipeline depth (bit-neutral) is fastest at each batch of full layers? Every 4-warp stage count 2-6 with KV heads on
# the fastest axis, batch 1's 4w2s, and the old 2-warp 6-stage rule for reference; gpt-oss shapes, 1-64 sequences of
# 1k/4k/16k keys, twice (the spread).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
for i in 1 2; do
  timeout 270 python3 scripts/probes/decode_attention_sweep.py --batches 1,2,4,8,16,32,64 \
    --contexts 1024,4096,16384 --windows 0 --no-extras \
    --configs n64w4s2,n64w4s2k,n64w4s3k,n64w4s4k,n64w4s5k,n64w4s6k,n64w2s6k \
    --json $OUT/sweep_$i.json > $OUT/sweep_$i.log 2>&1
  echo "sweep $i rc $? ($SECONDS s)"
done
sed -n '/| batch x context, window | default | n64/,$p' $OUT/sweep_1.log
sed -n '/| batch x context, window | default | n64/,$p' $OUT/sweep_2.log
