#!/bin/bash
# Call 6: where gpt-oss-20b's H200 files have no key (T = 192: keys 128 / 256; 96: 64 / 128; 48: 32 / 64), is the
# pair the engine reads within 2% of the tuner's winner? scripts/tune_moe.py writes into $OUT/cfg only (a diagnostic:
# nothing is copied into the tree).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
mkdir -p $OUT/cfg && cp src/quickmoe/kernels/configs/E32_N*_K2880_mxfp4_*_H200.json $OUT/cfg/
PYTHONPATH=src timeout 230 python3 scripts/tune_moe.py --shapes gpt-oss-20b --tokens 192,96,48 --out $OUT/cfg \
  > $OUT/tune_20b.log 2>&1
echo "tune rc $? ($SECONDS s)"; grep -o 'T=[0-9]*: gemm1 [0-9.]* us\|gemm2 [0-9.]* us\|in use [0-9.]* + [0-9.]* us\|no candidate[^)]*' \
  $OUT/tune_20b.log
