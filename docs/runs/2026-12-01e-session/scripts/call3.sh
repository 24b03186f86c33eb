#!/bin/bash
# Call 3 (2026-12-01 fifth session): the K/V distance at the full layers' large points (H200 rule: 6 stages at 9-512
# programs = 2 steps ahead, 8 at 256-383 = 3, 4 beyond 512 = 1), where SDPA leads by 1-4%; and the windowed layers'
# candidate rule (2 warps, 5-6 stages) again beside the tree's, with 2 warps and 4 stages at 64-256 sequences.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
F=n64w2s3k,n64w2s4k,n64w2s5k,n64w2s6k,n64w2s8k,n64w4s4k,n64w4s6k
timeout 280 python3 scripts/probes/decode_attention_sweep.py --windows 0 --contexts 1024,4096,16384 \
  --batches 32,64,128,256 --configs $F --no-extras --workers 8 --json $OUT/dec_full_large.json \
  > $OUT/dec_full_large.log 2>&1; echo "full sweep rc $? ($SECONDS s)"
W=n64w2s4k,n64w2s5,n64w2s6,n64w2s5k,n64w2s6k,n64w4s2,n64w4s3k
timeout 200 python3 scripts/probes/decode_attention_sweep.py --windows 128 --contexts 4096 \
  --batches 1,4,8,16,32,64,128,256 --configs $W --no-extras --workers 8 --json $OUT/dec_window2.json \
  > $OUT/dec_window2.log 2>&1; echo "window sweep rc $? ($SECONDS s)"
grep -E '^\|' $OUT/dec_full_large.log | tail -14; grep -E '^\|' $OUT/dec_window2.log | tail -10; echo "($SECONDS s)"
