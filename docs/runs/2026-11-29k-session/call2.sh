#!/bin/bash
# session 2026-11-29 eleventh, call 2: the unreliable NVFP4 tile (Qwen3 NVFP4, 128 rows, 4 warps, transposed) forced:
# how often, where, with the same inputs repeated; at smaller T; the 8-warp twin as control; then compute-sanitizer
# (racecheck, synccheck, memcheck without the caching allocator) on it at T = 1,024
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
F=.ab/forced_nan.py
timeout 100 python3 $F --tokens 8192 --runs 6 --same 3 > $OUT/forced_8192.txt 2>&1; echo "8192 exit $? ($SECONDS s)"
grep -v Warn $OUT/forced_8192.txt | tail -14
for t in 2048 1024; do
  timeout 60 python3 $F --tokens $t --runs 10 --same 2 > $OUT/forced_$t.txt 2>&1; echo "$t exit $? ($SECONDS s)"
  grep -v Warn $OUT/forced_$t.txt | tail -6
done
timeout 60 python3 $F --tokens 8192 --runs 6 --same 3 --config 128,64,64,8,3,1 > $OUT/forced_8192_w8.txt 2>&1
echo "8192 w8 exit $? ($SECONDS s)"; grep -v Warn $OUT/forced_8192_w8.txt | tail -3
CS=compute-sanitizer; command -v $CS || CS=/usr/local/cuda/bin/compute-sanitizer
for tool in racecheck synccheck; do
  [ $SECONDS -gt 420 ] && break
  timeout 120 $CS --tool $tool --print-limit 30 python3 $F --tokens 1024 --runs 1 --no-ref > $OUT/san_$tool.txt 2>&1
  echo "$tool exit $? ($SECONDS s)"; grep -v Warn $OUT/san_$tool.txt | tail -8
done
[ $SECONDS -lt 450 ] && { PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 100 $CS --tool memcheck --print-limit 30 python3 $F \
  --tokens 1024 --runs 1 --no-ref > $OUT/san_memcheck.txt 2>&1; echo "memcheck exit $? ($SECONDS s)"; \
  grep -v Warn $OUT/san_memcheck.txt | tail -8; }
cd $OUT && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz .
