#!/usr/bin/env bash
# Session 2026-11-29c, call 5 (issue 15): quickmoe serve (defaults) from the work tree (8-row MoE tiles at T = 1-64 on
# the H200) and from .ab/base (the session's starting tree), in turns: bench serve at concurrency 1 and 32,
# 1000 -> 1000 (the acceptance's ITL points).
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
[ -f /tmp/gpt-oss-20b/config.json ] || python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q
echo "checkpoint ready ($SECONDS s)"
for run in new base; do
  [ $SECONDS -gt 230 ] && { echo "stopping: $SECONDS s gone"; break; }
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe serve /tmp/gpt-oss-20b --port 8011 -q > "$OUT/serve_$run.log" 2>&1 &
  server=$!
  for _ in $(seq 240); do curl -sf localhost:8011/health > /dev/null && break; sleep 0.5; done
  python3 -m quickmoe bench serve --base-url http://127.0.0.1:8011 --concurrency 1,32 \
    --input-len 1000 --output-len 1000 --result-json "$OUT/bench_serve_$run.json" > "$OUT/bench_serve_$run.log" 2>&1
  echo "-- $run ($SECONDS s)"; tail -8 "$OUT/bench_serve_$run.log"
  kill -TERM "$server"; wait "$server"
done
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls
