#!/bin/bash
# Call 6 (2026-12-01 third session): decode attention's launch space on Qwen3-30B-A3B's heads (32 / 4 of 128) and
# Mixtral's (32 / 8 of 128), which take the H100's untuned default (4 warps, 2 stages) on every GPU: configs x
# batches 1-256 x contexts 1k-16k, beside SDPA.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
timeout 330 python3 scripts/probes/decode_attention_sweep.py --heads 32,4,128 --batches 1,8,32,64,256 \
  --contexts 1024,4096,16384 --windows 0 --workers 14 \
  --configs n64w2s2,n64w2s4k,n64w2s6k,n64w4s2,n64w4s2k,n64w4s3k,n64w4s4k,n64w8s2k \
  --json $OUT/decode_sweep_qwen3.json > $OUT/decode_sweep_qwen3.log 2>&1
echo "qwen3 decode sweep rc $? ($SECONDS s)"; sed -n '/^| batch x context, window | default |/,$p' $OUT/decode_sweep_qwen3.log
grep -E "^B=.*default.*@" $OUT/decode_sweep_qwen3.log | cut -c1-200
timeout $((585 - SECONDS)) python3 scripts/probes/decode_attention_sweep.py --heads 32,8,128 --batches 1,8,32,64,256 \
  --contexts 1024,4096,16384 --windows 0 --workers 14 --no-extras \
  --configs n64w2s2,n64w2s4k,n64w2s6k,n64w4s2,n64w4s2k,n64w4s3k,n64w4s4k,n64w8s2k \
  --json $OUT/decode_sweep_mixtral.json > $OUT/decode_sweep_mixtral.log 2>&1
echo "mixtral decode sweep rc $? ($SECONDS s)"; sed -n '/^| batch x context, window | default |/,$p' $OUT/decode_sweep_mixtral.log
tail -3 $OUT/decode_sweep_mixtral.log
