#!/bin/bash
# Call 2: settled kernel keys. The precompile's GPU test; serve --warmup auto fresh (new, base) and warm (new x2);
# bench coldstart --compile on (fresh and warm compiled starts) for new and base.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 240 python3 -m pytest -q -x -m gpu tests/models/test_kernel_precompile.py -p no:cacheprovider -vv \
  > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc $?" | tee -a $OUT/summary.txt
tail -3 $OUT/gpu_tests.log | cut -c1-600 | tee -a $OUT/summary.txt
WARMUP_RUNS="auto:fresh:.:nobench auto:warm:.:nobench auto:warm:.:nobench auto:fresh:base:nobench" timeout 300 \
  bash scripts/device/hotpath.sh serve-warmup > $OUT/hotpath.log 2>&1
echo "serve-warmup rc $?" | tee -a $OUT/summary.txt
cat $OUT/serve_warmup.txt >> $OUT/summary.txt
grep -h "Triton kernels\|could not be compiled" $OUT/serve_warmup_*.log | sed 's/.*\r//' | head -20 >> $OUT/summary.txt
for tree in new base; do
  root=$PWD; [ $tree = base ] && root=$PWD/.ab/base
  rm -rf /tmp/qmc_cold_$tree
  QUICKMOE_CACHE_DIR=/tmp/qmc_cold_$tree PYTHONPATH=/tmp/site:$root/src timeout 240 python3 -m quickmoe bench coldstart \
    /tmp/gpt-oss-20b -n 1 --device cuda --compile on > $OUT/coldstart_compile_$tree.txt 2>&1
  echo "coldstart $tree rc $?" >> $OUT/summary.txt
  tail -25 $OUT/coldstart_compile_$tree.txt >> $OUT/summary.txt
done
cat $OUT/summary.txt
