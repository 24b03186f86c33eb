#!/usr/bin/env bash
# Session 2026-11-30k call 5 (nvidia-h200-x2): scripts/tune_moe.py (small grid) with the register twins in two
# variants (one K step a stage at the winner's stages, two at 2 stages) on gpt-oss-20b: GPU 0 T = 64, 128, 256,
# GPU 1 T = 512, 1,024, 2,048; then gpt-oss-120b at 256 and 512 on whichever GPU is free first.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
export PYTHONPATH=src
for g in 0 1; do mkdir -p /tmp/tuned$g && cp src/quickmoe/kernels/configs/*.json /tmp/tuned$g/; done
( CUDA_VISIBLE_DEVICES=0 timeout -k 10 400 python3 scripts/tune_moe.py --shapes gpt-oss-20b --tokens 64,128,256 \
    --out /tmp/tuned0 > "$OUT/tune20_gpu0.txt" 2>&1
  echo "tune 20b gpu0: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
  CUDA_VISIBLE_DEVICES=0 timeout -k 10 $(( 520 - ($(date +%s) - t0) )) python3 scripts/tune_moe.py \
    --shapes gpt-oss-120b --tokens 256,512 --out /tmp/tuned0 > "$OUT/tune120_gpu0.txt" 2>&1
  echo "tune 120b gpu0: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt" ) &
p0=$!
( CUDA_VISIBLE_DEVICES=1 timeout -k 10 400 python3 scripts/tune_moe.py --shapes gpt-oss-20b --tokens 512,1024,2048 \
    --out /tmp/tuned1 > "$OUT/tune20_gpu1.txt" 2>&1
  echo "tune 20b gpu1: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt" ) &
p1=$!
while kill -0 $p0 2>/dev/null || kill -0 $p1 2>/dev/null; do sleep 2; done
for g in 0 1; do for f in /tmp/tuned$g/E*_mxfp4_*NVIDIA_H200.json; do
  cmp -s "$f" src/quickmoe/kernels/configs/$(basename $f) || cp "$f" "$OUT/gpu${g}_$(basename $f)"; done; done
{ grep -hE "^gpt-oss|T =|T=|best|winner|fallback|twin" "$OUT"/tune*.txt | grep -v skipped | head -60; } >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
