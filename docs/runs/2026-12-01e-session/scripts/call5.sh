#!/bin/bash
# Call 5 (2026-12-01 fifth session): the new sliding-layer rule in the decode step's kernel (RoPE and the KV write
# fused: `decode_attention_sweep.py --rotary`, new) at 8-32 sequences; the bf16 quality tests on the work tree
# (sliding layers now 2 warps at every batch size on the H200); the headline on the work tree.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
G=/tmp/gpt-oss-20b
timeout 150 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > /dev/null &
for r in 1 2; do
  timeout 120 python3 scripts/probes/decode_attention_sweep.py --rotary --windows 128 --contexts 1024 \
    --batches 1,8,16,32,64 --configs n64w4s2,n64w2s6k,n64w2s5k,n64w4s6k --no-extras --workers 8 \
    --json $OUT/rot_window_r$r.json > $OUT/rot_window_r$r.log 2>&1; echo "rotary sweep $r rc $? ($SECONDS s)"
done
wait
timeout 220 python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_quality_gpu.py -rA \
  > $OUT/quality_tests.log 2>&1; echo "quality: $(tail -1 $OUT/quality_tests.log) ($SECONDS s)"
timeout 150 python3 -m quickmoe bench generate $G --num-prompts 256 --input-len 1000 --output-len 1000 \
  --json $OUT/headline.json > $OUT/headline.log 2>&1; echo "headline rc $? ($SECONDS s)"
for r in 1 2; do grep -E '^\|' $OUT/rot_window_r$r.log | tail -6; done
grep -E "alone vs batch|float32 vs bf16" $OUT/quality_tests.log
grep -E '^quickmoe|by step kind|at batch 1 by op' $OUT/headline.log | cut -c1-200; echo "($SECONDS s)"
