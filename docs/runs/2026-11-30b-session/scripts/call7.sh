#!/usr/bin/env bash
# Session 2026-11-30b call 7 (nvidia-h200): the alignment plan per tile chunk at 32 and 8 experts (gpt-oss-20b, Mixtral), new / base.
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
for run in new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src timeout -k 5 60 python3 scripts/probes/moe_kernel_split_probe.py \
    --shapes gpt-oss-20b --format mxfp4 --tokens 2048,8192 > "$OUT/split_$run.log" 2>&1
  PYTHONPATH=/tmp/site:$root/src timeout -k 5 60 python3 scripts/probes/moe_kernel_split_probe.py \
    --shapes mixtral-8x7b --format fp8 --tokens 2048,8192 >> "$OUT/split_$run.log" 2>&1
  echo "-- $run: exit $?"; grep -v -i warn "$OUT/split_$run.log" | grep "T=" | cut -c1-260
done | tee "$OUT/split_ab.txt"
