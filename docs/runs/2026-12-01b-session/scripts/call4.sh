#!/bin/bash
# Call 4 (2026-12-01 second session, issue 15): quickmoe serve (defaults) + bench serve 1000 -> 1000 at concurrency
# 1, 32, 128 on HEAD (hotpath.sh serve); then concurrency 32 alone against the split rule before (.ab/base = ca71818's
# src), in turns: the decode graph of batch 32 takes one split now.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
timeout 300 bash scripts/device/hotpath.sh serve 2>&1 | grep -v -i warn | grep -E 'health|concurrency|Concurrency|Output token|ITL|TTFT|Failed|failed|==' | head -60
echo "serve done ($SECONDS s)"
CKPT=/tmp/gpt-oss-20b
for round in 1 2; do
  for tree in base new; do
    [ $SECONDS -gt 500 ] && { echo "skipping $tree $round: $SECONDS s"; continue; }
    src=$PWD/src; [ $tree = base ] && src=$PWD/.ab/base/src
    PYTHONPATH=/tmp/site:$src python3 -m quickmoe serve $CKPT --port 8012 -q > $OUT/serve32_${tree}_r$round.log 2>&1 &
    server=$!
    for _ in $(seq 240); do curl -sf localhost:8012/health > /dev/null && break; sleep 0.5; done
    timeout 100 python3 -m quickmoe bench serve --base-url http://127.0.0.1:8012 --concurrency 32 --input-len 1000 \
      --output-len 1000 --result-json $OUT/bench32_${tree}_r$round.json > $OUT/bench32_${tree}_r$round.txt 2>&1
    echo "serve 32 $tree round $round rc $? ($SECONDS s)"
    kill -TERM $server; wait $server
  done
done
for f in $OUT/bench32_*.txt; do echo "== $f"; grep -iE 'output token throughput|median (itl|tpot|ttft)|failed' $f; done
