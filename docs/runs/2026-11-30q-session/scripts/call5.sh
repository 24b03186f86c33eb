#!/bin/bash
# Call 5 (2026-11-30 seventeenth session, issue 15): the H200's full layers on 2 warps at every batch size (work tree)
# against 4 warps up to 512 programs (c2d2504, .ab/base): the quality tests (bf16 alone vs batch of 64), the
# attention kernel tests, bench attention in turns, then bench generate's batch-1 step and op families in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
(timeout 150 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > $OUT/make.log 2>&1; \
  echo "make rc $?" >> $OUT/make.log) &
timeout 150 python3 -m pytest -q -rP -p no:cacheprovider tests/models/test_quality_gpu.py > $OUT/quality_tests.log 2>&1
echo "quality_tests rc $?: $(tail -1 $OUT/quality_tests.log)"
grep -E '^\| (alone|graphs: alone)' $OUT/quality_tests.log | head -4
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_kernels.py \
  > $OUT/attention_kernel_tests.log 2>&1
echo "attention_kernel_tests rc $?: $(tail -1 $OUT/attention_kernel_tests.log)"
grep -E '^(FAILED|ERROR)' $OUT/attention_kernel_tests.log | head
wait; cat $OUT/make.log
for run in new base new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src timeout 60 python3 -m quickmoe bench attention > $OUT/bench_attention_$run.$SECONDS.log 2>&1
  echo "bench attention $run rc $?"
done
echo "($SECONDS s)"
AB_RUNS="new base new base" timeout 330 bash scripts/device/hotpath.sh ab-profile > $OUT/ab_profile_stage.log 2>&1
echo "ab-profile rc $? ($SECONDS s)"
cat $OUT/ab_profile.txt
