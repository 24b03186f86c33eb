#!/bin/bash
# Call 2 (2026-12-05, nvidia-h100-x1, d8ba727; the machine of call 1, /tmp/gpt-oss-20b made there): issue 15's
# served figures (`hotpath.sh serve`: quickmoe serve defaults, bench serve at concurrency 1, 32, 128, 1000 -> 1000),
# then issue 16's (`coldstart2.sh coldstart serve`: bench coldstart -n 3 with transformers and an empty Triton cache
# beside; /health from outside, 3 launches).
# Predictions: ITL median c=1 ~2.4 ms, c=32 ~6.3-6.5 ms (11-27: 2.40 / 6.48); c=128 10,300-10,900 tok/s (11-27:
# 10,282; GC frozen and prompt graphs since); first token ~7-8 s (the H200 gave 8.6-9 s with idle work; 11-27 H100
# figures in benchmarks.md), /health ~10-11 s: the 6.0 / 6.5 s goals stay unmet.
source scripts/device/env.sh
base=$OUT
trap 'cd $base && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 300 bash scripts/device/hotpath.sh serve > $OUT/hotpath_serve.log 2>&1
echo "serve rc $? ($SECONDS s)"; cat $OUT/serve_ready.txt
grep -E -A5 "conc +ok" $OUT/bench_serve.log | cut -c1-250
timeout 270 bash scripts/device/coldstart2.sh coldstart serve > $OUT/coldstart2.log 2>&1
echo "coldstart2 rc $? ($SECONDS s)"
grep -v INFO $OUT/cold2_20b.txt | tail -25 | cut -c1-220; tail -5 $OUT/serve_probe.txt
