#!/usr/bin/env bash
# Session 2026-11-28c, call 5 (same machine as calls 3-4): import torch (wall and in-process), gpt-oss-20b's cold
# start and serve's /health from outside, warm kernel cache, on the work tree.
set -uo pipefail
source scripts/device/env.sh
G=/tmp/gpt-oss-20b
[ -f $G/config.json ] || python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q
el() { python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.2f}')" "$1"; }
for i in 1 2 3; do
  t0=$(date +%s.%N); inproc=$(python3 -c "import time; t = time.perf_counter(); import torch; print(f'{time.perf_counter() - t:.2f}')")
  echo "import torch: wall $(el $t0) s, in-process $inproc s" | tee -a "$OUT/import_torch.txt"
done
timeout 120 python3 -m quickmoe bench coldstart $G -n 3 --device cuda --json "$OUT/cold_20b.json" 2>&1 | grep -v INFO \
  | grep -E "phase|interpreter|imports|build|load |process|weights_ready|total|kernel cache" | tee "$OUT/cold_20b.txt"
for i in 1 2 3; do
  t0=$(date +%s.%N); python3 -m quickmoe serve $G --port 8012 -q > "$OUT/serve_$i.log" 2>&1 & pid=$!
  for _ in $(seq 600); do curl -sf localhost:8012/health > /dev/null && break; sleep 0.05; done
  echo "serve /health 200 after $(el $t0) s" | tee -a "$OUT/health.txt"
  kill -TERM $pid; wait $pid
done
echo "== done $(date +%T)"
