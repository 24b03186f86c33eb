#!/bin/bash
# Call 3 (2026-12-05 second session, nvidia-h100-x1): calls 1-2's tuned H100 files (T = 1-512) in the model, against
# .ab/main (33e2907). Stages: `bench generate` 256 x 1000 -> 1000 (serving defaults) for new, base, new; then
# `hotpath.sh ab-profile` (64 x 1000 -> 64: the batch-1 step and its kernels) new, base, new, base.
# Prediction: the batch-256 decode step's MoE (8.42 ms of 13.7, profiler 12-05) -20% at T = 256 in bench moe ->
# the step ~12.0 ms, 256 x 1000 -> 1000 14,773 -> ~16,000 output tok/s; the batch-1 step 2.43 -> ~2.27 ms (T = 1's
# MoE 44.6 -> 37.7 us a layer, x24).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/gpu.txt
[ -f /tmp/gpt-oss-20b/config.json ] || python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q
for run in new base new; do
  root=$PWD; [ $run = base ] && root=$PWD/.ab/main
  log=$OUT/gen_${run}_$SECONDS
  PYTHONPATH=/tmp/site:$root/src timeout 150 python3 -m quickmoe bench generate /tmp/gpt-oss-20b --num-prompts 256 \
    --input-len 1000 --output-len 1000 --json $log.json > $log.log 2>&1
  echo "-- $run rc $? ($SECONDS s)"
  grep -E '^quickmoe|decode at batch 1: median|throughput run by step|decode step at batch 256 by' $log.log | cut -c1-260
done
timeout 200 bash scripts/device/hotpath.sh ab-profile > $OUT/hotpath_ab_profile.log 2>&1
echo "ab-profile rc $? ($SECONDS s)"; grep -E "^--|decode at batch 1" $OUT/ab_profile.txt | cut -c1-200
