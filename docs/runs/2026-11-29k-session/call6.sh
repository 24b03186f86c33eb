#!/bin/bash
# session 2026-11-29 eleventh, call 6: bench generate 256 x 1000 -> 1000, three more turns each of the work tree
# (gpt-oss-20b GEMM 2 key 256 transposed) and HEAD (.ab/base): call 5 gave the decode steps -3% and the same tok/s
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
CKPT=/tmp/gpt-oss-20b
python3 -m quickmoe make-checkpoint $CKPT --preset gpt-oss-20b -q > $OUT/make.txt 2>&1
echo "checkpoint ($SECONDS s)"
i=0
for run in base new base new base new; do
  i=$((i + 1))
  [ $SECONDS -gt 480 ] && { echo "skip $run"; continue; }
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench generate $CKPT --num-prompts 256 --input-len 1000 \
    --output-len 1000 --json $OUT/gen_${i}_$run.json > $OUT/gen_${i}_$run.txt 2>&1
  echo "-- $i $run ($SECONDS s): $(grep -E '^quickmoe ' $OUT/gen_${i}_$run.txt) | $(grep -oE 'decode 999 steps.{0,80}' $OUT/gen_${i}_$run.txt)"
done
cd $OUT && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz .
