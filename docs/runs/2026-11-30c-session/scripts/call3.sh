#!/bin/bash
# Call 3: the manifest and the early workers. GPU test (fresh / warm / off); serve --warmup auto fresh + warm for new
# and base; bench coldstart (warm page cache, default settings) -n 3 new and base; new with --compile on -n 1.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 240 python3 -m pytest -q -x -m gpu tests/models/test_kernel_precompile.py -p no:cacheprovider -vv \
  > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc $?" | tee -a $OUT/summary.txt
tail -3 $OUT/gpu_tests.log | cut -c1-600 | tee -a $OUT/summary.txt
WARMUP_RUNS="auto:fresh:.:nobench auto:warm:.:nobench auto:warm:.:nobench auto:fresh:base:nobench auto:warm:base:nobench" \
  timeout 300 bash scripts/device/hotpath.sh serve-warmup > $OUT/hotpath.log 2>&1
echo "serve-warmup rc $?" | tee -a $OUT/summary.txt
cat $OUT/serve_warmup.txt >> $OUT/summary.txt
grep -h "Triton kernels\|could not be compiled" $OUT/serve_warmup_*.log | sed 's/.*\r//' | head -20 >> $OUT/summary.txt
i=0
for run in new base new base; do
  i=$((i + 1))
  root=$PWD; [ $run = base ] && root=$PWD/.ab/base
  QUICKMOE_CACHE_DIR=/tmp/qmc_cold_$run PYTHONPATH=/tmp/site:$root/src timeout 150 python3 -m quickmoe bench coldstart \
    /tmp/gpt-oss-20b -n 3 --device cuda > $OUT/coldstart_${i}_$run.txt 2>&1
  echo "coldstart $i $run rc $?" >> $OUT/summary.txt
  grep -E "^(imports|build|load|process|precompile|capture|weights_ready|total) " $OUT/coldstart_${i}_$run.txt >> $OUT/summary.txt
done
rm -rf /tmp/qmc_cc
QUICKMOE_CACHE_DIR=/tmp/qmc_cc timeout 200 python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 1 --device cuda \
  --compile on > $OUT/coldstart_compile_new.txt 2>&1
echo "coldstart compile rc $?" >> $OUT/summary.txt
tail -22 $OUT/coldstart_compile_new.txt >> $OUT/summary.txt
cat $OUT/summary.txt
