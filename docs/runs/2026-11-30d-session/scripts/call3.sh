#!/bin/bash
# Call 3 (2026-11-30 fourth session, issue 16): --compile on, fresh and warm caches, in turns new (work tree: the
# attention window an input of the compiled layer, so sliding and full layers share one graph; Inductor's compile
# workers not started on a warm cache; the bench's untimed compiled start) / base (01b3673, .ab/base); one shared
# QUICKMOE_CACHE_DIR (the base's runs read the Dynamo/Inductor bytecode the new tree's untimed start wrote). Then the
# GPU tests of compile and CUDA graphs on the work tree.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
S=$OUT/summary.txt
timeout 120 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > $OUT/make.log 2>&1
echo "make rc $?" >> $S
export QUICKMOE_CACHE_DIR=/tmp/qc3
i=0
for run in new base new base; do
  i=$((i + 1))
  root=$PWD; [ $run != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src timeout 150 python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 1 \
    --device cuda --compile on --json $OUT/compile_${i}_$run.json > $OUT/compile_${i}_$run.txt 2>&1
  echo "compile $i $run rc $?" >> $S
  python3 .ab/compile_summary.py $OUT/compile_${i}_$run.json >> $S 2>&1
done
unset QUICKMOE_CACHE_DIR
timeout 170 python3 -m pytest -q -m gpu tests/models/test_compile.py tests/models/test_cuda_graphs.py \
  -p no:cacheprovider > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc $?" >> $S; tail -4 $OUT/gpu_tests.log >> $S
cat $S
