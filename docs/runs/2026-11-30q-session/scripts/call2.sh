#!/bin/bash
# Call 2 (2026-11-30 seventeenth session, issue 15): the bf16 invariance test on the old tree (26c1af2: the H200's
# 2-warp rule) beside the work tree, run twice (same bits run to run?), then bench attention in turns new / base.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
ln -sfn $PWD/src/quickmoe/checkpoint/embedded .ab/base/src/quickmoe/checkpoint/embedded
T=tests/models/test_quality_gpu.py::test_bf16_batch_invariance_and_graphs_agree_on_99_percent_of_greedy_tokens
for run in base new; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src timeout 110 python3 -m pytest -q -rP -p no:cacheprovider "$T" \
    > $OUT/quality_$run.log 2>&1
  echo "quality $run rc $?: $(tail -1 $OUT/quality_$run.log)"
  PYTHONPATH=/tmp/site:$root/src python3 -c "import quickmoe; print(quickmoe.__file__)" >> $OUT/quality_$run.log
  grep -E '^\| (alone|graphs: alone)' $OUT/quality_$run.log | head -2
done
for run in new base new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src timeout 110 python3 -m quickmoe bench attention > $OUT/bench_attention_$run.$SECONDS.log 2>&1
  echo "bench $run rc $? ($SECONDS s)"
  { echo "-- $run"; grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |HBM" $OUT/bench_attention_$run.*.log | tail -40; } > /dev/null
done
for f in $OUT/bench_attention_*.log; do echo "-- $f"; grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |HBM" $f; done > $OUT/ab_attention.txt
cat $OUT/ab_attention.txt | head -80
