#!/bin/bash
# Call 2 (2026-12-01 fifth session): the pipeliner's K/V distance. Triton 3.6 gives a load chain of depth 2 (block
# ids, then K and V) (stages - 1) // 2 steps each: 2-4 stages copy a step's K and V one step ahead, after the step
# before's dots (one buffer), 5-6 two steps ahead, 8 three. Sliding decode layers (2 stages) and full layers at
# batch 1 (4 stages) thus expose every step's copy latency. Sweep decode at the window's points and small full
# batches with 5-8 stages; then prefill (2 stages now) at 5 and 6.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
W=n64w4s2,n64w4s3,n64w4s5,n64w4s6,n64w4s8,n64w2s2,n64w2s5,n64w2s6,n64w2s8,n64w4s5k,n64w4s6k
timeout 240 python3 scripts/probes/decode_attention_sweep.py --windows 128 --contexts 4096 \
  --batches 1,2,4,8,16,32,64,128,256 --configs $W --no-extras --workers 8 --json $OUT/dec_window.json \
  > $OUT/dec_window.log 2>&1; echo "window sweep rc $? ($SECONDS s)"
F=n64w2s4k,n64w2s5k,n64w2s6k,n64w2s8k,n64w4s4k,n64w4s5k,n64w4s6k,n64w4s2
timeout 200 python3 scripts/probes/decode_attention_sweep.py --windows 0 --contexts 1024,4096,16384 \
  --batches 1,2,4 --configs $F --no-extras --workers 8 --json $OUT/dec_full.json \
  > $OUT/dec_full.log 2>&1; echo "full sweep rc $? ($SECONDS s)"
for shape in gptoss:64,8,64 qwen3:32,4,128; do
  timeout 150 python3 scripts/probes/prefill_attention_sweep.py --heads ${shape#*:} --block-q 16 --block-n 64 \
    --warps 8 --stages 1,2,5,6 --orders 1 --maxnreg 128 --json $OUT/pre_${shape%%:*}.json \
    > $OUT/pre_${shape%%:*}.log 2>&1; echo "prefill ${shape%%:*} rc $? ($SECONDS s)"
done
grep -E '^\|' $OUT/dec_window.log | head -14; grep -E '^\|' $OUT/dec_full.log | head -14
for s in gptoss qwen3; do grep -E '^\|' $OUT/pre_$s.log | head -8; done; echo "($SECONDS s)"
