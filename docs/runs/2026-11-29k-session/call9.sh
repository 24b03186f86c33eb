#!/bin/bash
# session 2026-11-29 eleventh, call 9: prompt checks in C (the work tree) against a037f46 (.ab/base): bench generate
# 256 x 1000 -> 1000 in turns; the run's seconds outside its steps (seconds - steps' wall) is where the checks were
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
CKPT=/tmp/gpt-oss-20b
python3 -m quickmoe make-checkpoint $CKPT --preset gpt-oss-20b -q > $OUT/make.txt 2>&1
i=0
for run in base new base new base new; do
  i=$((i + 1))
  [ $SECONDS -gt 175 ] && { echo "skip $run"; continue; }
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src timeout 60 python3 -m quickmoe bench generate $CKPT --num-prompts 256 --input-len 1000 \
    --output-len 1000 --json $OUT/gen_${i}_$run.json > $OUT/gen_${i}_$run.txt 2>&1
  python3 -c "
import json; q = json.load(open('$OUT/gen_${i}_$run.json'))['quickmoe']
print('-- $i $run ($SECONDS s): %.1f tok/s, %.3f s, outside the steps %.3f s' % (q['output_tokens_per_s'], q['seconds'], q['seconds'] - q['steps']['wall_ms'] / 1e3))"
done
cd $OUT && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz .
