#!/usr/bin/env bash
# Session 2026-11-29c, call 4 (issue 15): the whole model with 8-row MoE tiles. Trees: new (work tree: H200 20b files
# with 8-row tiles at T = 1-64), mid (.ab/mid: 8 rows at T = 1-16 only), base (.ab/base: HEAD, 16 rows). bench
# generate 64 x 1000 -> 64 (batch-1 step, the batch-64 step by op family) and 32 x 1000 -> 64 (the batch-32
# step), in turns.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
[ -f /tmp/gpt-oss-20b/config.json ] || python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q
echo "checkpoint ready ($SECONDS s)"
for turn in a b; do
  for run in new mid base; do
    root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
    for n in 64 32; do
      [ $SECONDS -gt 470 ] && { echo "stopping: $SECONDS s gone"; break 3; }
      f="$OUT/gen_${run}_n${n}_$turn"
      PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe bench generate /tmp/gpt-oss-20b --num-prompts $n \
        --input-len 1000 --output-len 64 --json "$f.json" > "$f.log" 2>&1
      echo "-- $run n=$n turn $turn ($SECONDS s)"; grep -E "decode at batch 1: median|by op family" "$f.log"
    done
  done
done
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls
