#!/bin/bash
# Call 2 (2026-12-05 second session, nvidia-h100-x1): the tree of call 1's tuned T = 1-16 files (uncommitted on
# 33e2907). The H100's gpt-oss-20b MXFP4 files at T = 32-512 date from 2026-11-24 too: no 8-row tiles at 32, no
# register-operand tiles (the H200's files take them at 64-1,024: GEMM 1 23% faster at T = 256 as a probe,
# 2026-11-30 fifth/sixth sessions). Stages: tune_moe.py for gpt-oss-20b at T = 32, 64, 128, 256, 512 into $OUT/cfg,
# the changed files into the tree, then `bench moe --tokens 32,64,128,256,512 --no-baselines` in turns between the
# tuned tree (new) and .ab/main (33e2907, base). The 20b checkpoint is made in the background for call 3.
# Prediction: T = 256 in a graph 10-20% faster (GEMM 1 the larger part); T = 32 ~15% faster (8-row tiles);
# T = 64-128 0-10%.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/gpu.txt
[ -f /tmp/gpt-oss-20b/config.json ] || (python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q \
  > $OUT/make.log 2>&1; echo "make rc $? ($SECONDS s)" >> $OUT/make.log) &
mkdir -p $OUT/cfg && cp src/quickmoe/kernels/configs/*.json $OUT/cfg/
PYTHONPATH=src timeout 330 python3 scripts/tune_moe.py --shapes gpt-oss-20b --tokens 32,64,128,256,512 --out $OUT/cfg \
  > $OUT/tune_gpt-oss-20b.log 2>&1
echo "tune rc $? ($SECONDS s)"
grep -o 'T=[0-9]*: gemm1 [0-9.]* us\|gemm2 [0-9.]* us\|in use [0-9.]* + [0-9.]* us\|no candidate[^)]*' \
  $OUT/tune_gpt-oss-20b.log | paste -sd' ' | sed 's/T=/\nT=/g' | cut -c1-200
changed=$(cd $OUT/cfg && for f in *.json; do cmp -s "$f" "$OLDPWD/src/quickmoe/kernels/configs/$f" || echo "$f"; done)
(cd $OUT/cfg && rm -f $(ls *.json | grep -vxF "$changed"))
echo "changed: ${changed:-none}"
cp $OUT/cfg/*.json src/quickmoe/kernels/configs/ 2>/dev/null
for run in new base new base; do
  root=$PWD; [ $run = base ] && root=$PWD/.ab/main
  log=$OUT/bench_moe_${run}_$SECONDS
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench moe --shapes gpt-oss-20b \
    --tokens 32,64,128,256,512 --no-baselines -q --json $log.json > $log.log 2>&1
  echo "-- $run rc $? ($SECONDS s)"
  grep -E "^gpt-oss" $log.log | awk '{printf "T=%s %s us %s%%  ", $3, $5, $10} END {print ""}'
done
wait; cat $OUT/make.log
