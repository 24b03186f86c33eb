#!/bin/bash
# Call 2 (2026-12-05 third session, nvidia-h100-x1): should the H100's full layers take the H200's decode rule (2
# warps at every batch size; 4 stages up to 8 programs, 6 at 9-512, 8 and one split where one split runs 256-383
# programs, 4 beyond)? On 2026-12-05 (first session) SDPA beat ours at 32 sequences by 4-12% (32 x 1k: 26.1 against
# 29.6 us) and at 64 x 1k-16k by 1-3%. Prediction: 2 warps with 6-8 stages take 3-8% off at 16-64 sequences (as on
# the H200), and one split with 8 stages at 32 sequences another 2-5% (the H200: 20.4 against 22.7 us at 32 x 1k);
# still not SDPA's 12% at 32 x 1k; no change at 1-8. The sweep twice (the spread), gpt-oss shapes, full layers; then
# 24 and 32 sequences at 1 and 2 splits.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
for i in 1 2; do
  timeout 200 python3 scripts/probes/decode_attention_sweep.py --batches 1,2,4,8,16,32,48,64,128,256 \
    --contexts 1024,4096,16384 --windows 0 --no-extras \
    --configs n64w4s2,n64w4s3k,n64w2s4k,n64w2s6k,n64w2s8k \
    --json $OUT/sweep_$i.json > $OUT/sweep_$i.log 2>&1
  echo "sweep $i rc $? ($SECONDS s)"
done
timeout 150 python3 scripts/probes/decode_attention_sweep.py --batches 24,32 --contexts 1024,4096,16384 --windows 0 \
  --no-extras --configs n64w4s3k,n64w2s6k,n64w2s8k --splits 1,2 --json $OUT/splits.json > $OUT/splits.log 2>&1
echo "splits rc $? ($SECONDS s)"
sed -n '/| batch x context, window | default | n64/,$p' $OUT/sweep_1.log
sed -n '/| batch x context, window | default | n64/,$p' $OUT/sweep_2.log
grep -E "^B=" $OUT/splits.log | grep "@"
