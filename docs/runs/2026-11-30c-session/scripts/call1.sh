#!/bin/bash
# Call 1: the precompile's GPU test, then serve --warmup auto fresh (new / base) and warm (new), no bench serve.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nproc | tee $OUT/nproc.txt
timeout 300 python3 -m pytest -q -x -m gpu tests/models/test_kernel_precompile.py -p no:cacheprovider \
  > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc $?" | tee -a $OUT/summary.txt
tail -5 $OUT/gpu_tests.log | tee -a $OUT/summary.txt
WARMUP_RUNS="auto:fresh:.:nobench auto:fresh:base:nobench auto:warm:.:nobench" timeout 420 bash scripts/device/hotpath.sh serve-warmup > $OUT/hotpath.log 2>&1
echo "serve-warmup rc $?" | tee -a $OUT/summary.txt
cat $OUT/serve_warmup.txt >> $OUT/summary.txt
grep -h "Triton kernels\|could not be compiled\|precompile" $OUT/serve_warmup_*.log | head -20 >> $OUT/summary.txt
cat $OUT/summary.txt
