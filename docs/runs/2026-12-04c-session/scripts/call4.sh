#!/bin/bash
# Call 4 (2026-12-04 third session, issue 18): Qwen3-30B-A3B FP8's GEMM 2 at keys 2,048 and 8,192 capped at 168
# registers (work tree) against .ab/main (HEAD, no cap), in the model. bench moe (call 2) had the layer at T = 8,192
# 1,049-1,053 us against 1,066-1,073 (-1.9%), T = 2,048 -0.6%.
# Prediction: the 8,192-token prefill step's GPU time -0.5 to -1.5% (the MoE ~60% of it, GEMM 2 a third of that);
# decode steps unchanged (no decode key capped).
# 16 of the 48 layers (make-checkpoint --layers 16), bench generate 64 x 2000 -> 4 (16 prefill steps of 8,192
# tokens), in turns, three rounds.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
M=/tmp/qwen3-fp8-16
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 300 python3 -m quickmoe make-checkpoint $M --preset qwen3-30b-a3b --weights fp8 --layers 16 -q --overwrite \
  > $OUT/make.log 2>&1
echo "checkpoint rc $? ($SECONDS s)"
run() {  # TREE TAG
  local root=$PWD; [ "$1" = base ] && root=$PWD/.ab/main
  PYTHONPATH=/tmp/site:$root/src timeout 150 python3 -m quickmoe bench generate $M --num-prompts 64 \
    --input-len 2000 --output-len 4 --json $OUT/gen_$2_$1.json > $OUT/gen_$2_$1.log 2>&1
  echo "$2 $1 rc $? ($SECONDS s): $(python3 -c "
import json; d = json.load(open('$OUT/gen_$2_$1.json'))['quickmoe']; s = d['steps']['by_kind']
print('prefill steps', s['prefill']['steps'], 'median', round(s['prefill']['gpu_ms_median'], 3), 'ms; total',
      round(s['prefill']['gpu_ms_total'], 1), 'ms; mixed', s.get('mixed', {}).get('steps'))" 2>&1 | tail -1)"
}
for round in 1 2 3; do
  if [ $((round % 2)) = 1 ]; then run new r$round; run base r$round; else run base r$round; run new r$round; fi
done
echo "($SECONDS s)"
