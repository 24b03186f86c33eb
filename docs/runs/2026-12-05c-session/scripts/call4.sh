#!/bin/bash
# Call 4 (2026-12-05 third session, nvidia-h100-x1, issue 15): the new H100 decode rule in the model. bench attention
# (call 3) read 32 x 1k 26.3 against 29.3 us (-10%), 32 x 4k -3%, 64 x 4k-16k -1-2%, the rest level. Prediction:
# `bench generate` 32 x 1000 -> 1000 (batch 32: 256 programs, one split; 12 full layers at 1-2k keys, ~3 us each a
# step) 0.5-1.5% faster a step, near the noise; the batch-1 step level (4.7 against 4.8 us a full layer). Turns new,
# base, new, base; then 256 x 1000 -> 1000 once on the new tree (the headline with both of today's changes; the
# previous session read 16,822 output tok/s on 995a5b5).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/gpu.txt
[ -f /tmp/gpt-oss-20b/config.json ] || python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q
echo "made ($SECONDS s)"
for run in new base new base; do
  root=$PWD; [ $run = base ] && root=$PWD/.ab/base
  log=$OUT/gen32_${run}_$SECONDS
  PYTHONPATH=/tmp/site:$root/src timeout 90 python3 -m quickmoe bench generate /tmp/gpt-oss-20b --num-prompts 32 \
    --input-len 1000 --output-len 1000 --json $log.json > $log.log 2>&1
  echo "-- $run rc $? ($SECONDS s)"
  grep -E '^quickmoe|decode at batch 1: median|throughput run by step' $log.log | cut -c1-260
done
log=$OUT/gen256_new_$SECONDS
timeout 120 python3 -m quickmoe bench generate /tmp/gpt-oss-20b --num-prompts 256 --input-len 1000 --output-len 1000 \
  --json $log.json > $log.log 2>&1
echo "-- 256 new rc $? ($SECONDS s)"
grep -E '^quickmoe|decode at batch 1: median|throughput run by step' $log.log | cut -c1-260
