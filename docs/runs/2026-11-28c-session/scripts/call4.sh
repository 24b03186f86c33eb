#!/usr/bin/env bash
# Session 2026-11-28c, call 4: gpt-oss-120b's prefill MoE tiles transposed as the 20b's (.ab/n120) vs the work tree.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
for run in n120 cur n120 cur; do
  root=$PWD; [ "$run" != cur ] && root=$PWD/.ab/$run
  { echo "-- $run"; PYTHONPATH=/tmp/site:$root/src timeout 150 python3 -m quickmoe bench moe --shapes gpt-oss-120b \
      --tokens 1024,2048,4096,8192 --no-baselines 2>&1 | grep -v INFO; } | tee -a "$OUT/ab_bench_moe_120b.txt"
done
echo "== done $(date +%T)"
