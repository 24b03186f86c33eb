#!/bin/bash
# Call 4 (2026-12-05, nvidia-h100-x1, d8ba727): issue 16's remaining figures on the H100 on the current tree:
# `coldstart2.sh compile` (bench coldstart --compile -n 3: the compile phase with fresh and warm caches),
# `compile-ratio` (the 2-layer model: 24 / 2 layers), `equality` (32 greedy float32 tokens eager / graphs / compile
# fresh / compile warm), then `120b` (gpt-oss-120b, MXFP4, /dev/shm: bench coldstart -n 3), each under its own limit.
# Predictions: warm compile phase 1.9-2.4 s (H200 1.95-2.30 s, the compiler's imports 1.25-1.9 s; the 20b's first
# token above was 4.13 s, so the warm --compile on start ~6-6.5 s); fresh 5-7 s (H200 5.53 s); ratio <= 1.3 (one
# graph for every layer); tokens identical; 120b first token 5.5-7 s (H100 7.07 s on 2026-11-25, H200 6.1 s).
source scripts/device/env.sh
base=$OUT
trap 'cd $base && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
for spec in compile:230 compile-ratio:110 equality:110; do
  timeout ${spec#*:} bash scripts/device/coldstart2.sh ${spec%:*} > $OUT/stage_${spec%:*}.log 2>&1
  echo "${spec%:*} rc $? ($SECONDS s)"
done
grep -E "^(compile|imports|weights_ready|total|first_token) " $OUT/cold2_20b_compile.txt | cut -c1-200
grep -E "compile phase|first 32" $OUT/stage_compile-ratio.log $OUT/stage_equality.log | cut -c1-300
left=$((500 - SECONDS)); [ $left -gt 60 ] || exit 0
timeout $left bash scripts/device/coldstart2.sh 120b > $OUT/stage_120b.log 2>&1
echo "120b rc $? ($SECONDS s)"
grep -E "^(imports|load|capture|weights_ready|total) |GPU memory" $OUT/cold2_120b.txt | cut -c1-200
