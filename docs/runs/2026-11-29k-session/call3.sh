#!/bin/bash
# session 2026-11-29 eleventh, call 3: the unreliable NVFP4 tile on the data that failed last session (experts and
# inputs from one generator seeded with T, repeated), with and without sentinel-filled outputs (never-written
# outputs show as 12288); other expert seeds; gpt-oss-20b's MXFP4 key 1,024 tile (one dot) the same way
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
F=.ab/forced_nan2.py
r() { local name=$1; shift; [ $SECONDS -gt 500 ] && { echo "skip $name"; return; }
  timeout 110 python3 $F "$@" > $OUT/$name.txt 2>&1; echo "$name exit $? ($SECONDS s)"; grep -v Warn $OUT/$name.txt | grep -v "^  seed.*other" | tail -8; }
r q8192_probe --tokens 8192 --expert-seeds probe --runs 6
r q8192_probe_sent --tokens 8192 --expert-seeds probe --runs 6 --sentinel
r q8192_seeds_sent --tokens 8192 --expert-seeds 1,2,3 --runs 2 --sentinel
r g1024_sent --shape gpt-oss-20b --format mxfp4 --tokens 1024 --one-dot --expert-seeds probe,1,2,3,4 --runs 4 --sentinel
r g2048_sent --shape gpt-oss-20b --format mxfp4 --tokens 2048 --one-dot --expert-seeds probe,5,6 --runs 4 --sentinel
cd $OUT && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz .
