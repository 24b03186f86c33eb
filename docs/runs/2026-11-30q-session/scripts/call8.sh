#!/bin/bash
# Call 8 (2026-11-30 seventeenth session, issue 16): the kernel precompile's order (869bce5: the MoE GEMMs' kernel
# modules first again) against the order that named the old module (.ab/order_old), on empty kernel caches:
# bench coldstart --compare-cold-kernels in turns; the precompile's GPU test (fresh / warm / off) first.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
(timeout 150 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > $OUT/make.log 2>&1; \
  echo "make rc $?" >> $OUT/make.log) &
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/models/test_kernel_precompile.py > $OUT/precompile_tests.log 2>&1
echo "precompile_tests rc $?: $(tail -1 $OUT/precompile_tests.log)"
wait; cat $OUT/make.log
for run in new order_old new order_old; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 2 --device cuda \
    --compare-cold-kernels --json $OUT/coldstart_${run}_$SECONDS.json > $OUT/coldstart_${run}_$SECONDS.log 2>&1
  echo "coldstart $run rc $? ($SECONDS s)"
done
for f in $OUT/coldstart_*.log; do echo "-- $f"; grep -E "^(phase|precompile|total|weights_ready)|kernel precompile" $f; done
