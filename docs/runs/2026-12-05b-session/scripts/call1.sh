#!/bin/bash
# Call 1 (2026-12-05 second session, nvidia-h100-x1, tree 33e2907): issue 15's MoE at T = 1-16 on the H100.
# The H100's gpt-oss MXFP4 files date from 2026-11-24: 16-row tiles at T = 1-16, no K in parts, and keys 4 and 8 of
# gpt-oss-20b's GEMM 1 equal to the fallback. The H200's files took 8-row tiles (17-25% faster per GEMM at T = 1-32
# on the H200, 2026-11-29 third session) and K in 2 parts at T = 1 (9-11%). Neither was ever tuned on the H100.
# Stages: scripts/tune_moe.py (small grid, --span) for gpt-oss-20b and -120b at T = 1, 2, 4, 8, 16 into $OUT/cfg,
# the changed files copied into the tree, then `bench moe --tokens 1,2,4,8,16 --no-baselines` in turns between
# the tuned tree (new) and .ab/main (33e2907, base).
# Prediction: each GEMM 15-25% faster at T = 1-16 as on the H200; 20b in a graph T = 1 45 -> ~36 us (40 -> ~50% of
# HBM), T = 4 114 -> ~92 us (59 -> ~73%), T = 8 147 -> ~118 us (67 -> ~83%); 120b alike.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/gpu.txt
mkdir -p $OUT/cfg && cp src/quickmoe/kernels/configs/*.json $OUT/cfg/
for shape in gpt-oss-20b gpt-oss-120b; do
  limit=250; [ $shape = gpt-oss-120b ] && limit=150
  PYTHONPATH=src timeout $limit python3 scripts/tune_moe.py --shapes $shape --tokens 1,2,4,8,16 --out $OUT/cfg \
    > $OUT/tune_$shape.log 2>&1
  echo "tune $shape rc $? ($SECONDS s)"
  grep -o 'T=[0-9]*: gemm1 [0-9.]* us\|gemm2 [0-9.]* us\|in use [0-9.]* + [0-9.]* us\|no candidate[^)]*\|kept[^;]*' \
    $OUT/tune_$shape.log | paste -sd' ' | sed 's/T=/\nT=/g' | cut -c1-200
done
changed=$(cd $OUT/cfg && for f in *.json; do cmp -s "$f" "$OLDPWD/src/quickmoe/kernels/configs/$f" || echo "$f"; done)
(cd $OUT/cfg && rm -f $(ls *.json | grep -vxF "$changed"))
echo "changed: ${changed:-none}"
cp $OUT/cfg/*.json src/quickmoe/kernels/configs/ 2>/dev/null
for run in new base new base; do
  root=$PWD; [ $run = base ] && root=$PWD/.ab/main
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench moe --shapes gpt-oss-20b,gpt-oss-120b \
    --tokens 1,2,4,8,16 --no-baselines -q --json $OUT/bench_moe_${run}_$SECONDS.json > $OUT/bench_moe_${run}_$SECONDS.log 2>&1
  echo "-- $run rc $? ($SECONDS s)"
  grep -E "^gpt-oss" $(ls -t $OUT/bench_moe_${run}_*.log | head -1) | awk '{printf "%s T=%s %s us %s%%  ", $1, $3, $5, $10} END {print ""}'
done
