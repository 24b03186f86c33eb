#!/bin/bash
# Call 4 (28a4a20): GPU tests (precompile, Triton's start, warm-up steps, CUDA graphs); serve --warmup auto fresh + warm
# x2 new, fresh + warm base; bench coldstart -n 3 (warm page cache, defaults) new / base / new / base.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 200 python3 -m pytest -q -m gpu tests/models/test_kernel_precompile.py tests/unit/test_triton_start.py \
  tests/models/test_cuda_graphs.py -p no:cacheprovider > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc $?" | tee -a $OUT/summary.txt; tail -2 $OUT/gpu_tests.log | tee -a $OUT/summary.txt
WARMUP_RUNS="auto:fresh:.:nobench auto:warm:.:nobench auto:warm:.:nobench auto:fresh:base:nobench auto:warm:base:nobench" \
  timeout 240 bash scripts/device/hotpath.sh serve-warmup > $OUT/hotpath.log 2>&1
echo "serve-warmup rc $?" | tee -a $OUT/summary.txt
cat $OUT/serve_warmup.txt >> $OUT/summary.txt
grep -h "Triton kernels\|could not be compiled" $OUT/serve_warmup_*.log | sed 's/.*\r//' | head -20 >> $OUT/summary.txt
i=0
for run in new base new base; do
  i=$((i + 1))
  root=$PWD; [ $run = base ] && root=$PWD/.ab/base
  QUICKMOE_CACHE_DIR=/tmp/qmc_cold_$run PYTHONPATH=/tmp/site:$root/src timeout 120 python3 -m quickmoe bench coldstart \
    /tmp/gpt-oss-20b -n 3 --device cuda > $OUT/coldstart_${i}_$run.txt 2>&1
  echo "coldstart $i $run rc $?" >> $OUT/summary.txt
  grep -E "^(imports|build|load|process|precompile|capture|weights_ready|total) " $OUT/coldstart_${i}_$run.txt >> $OUT/summary.txt
done
cat $OUT/summary.txt
