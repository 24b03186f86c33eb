#!/usr/bin/env bash
# Session 2026-11-30i call 4 (nvidia-h200-x2): quickmoe serve (defaults) with page-locked staging (new) against
# b4bdb49 (base), gpt-oss-20b: bench serve 1000 -> 256 at concurrency 128 (384 prompts) and 256 (768 prompts).
# new on GPU 0 beside base on GPU 1, then swapped.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make20.log" 2>&1
one() {  # tree gpu port round
  local tree=$1 gpu=$2 port=$3 round=$4
  local root=$PWD; [ "$tree" != new ] && root=$PWD/.ab/$tree
  local tag=${tree}_r$round
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 10 200 \
    python3 -m quickmoe serve /tmp/gpt-oss-20b --port $port -q > "$OUT/server_$tag.log" 2>&1 &
  local server=$!
  for _ in $(seq 120); do curl -sf localhost:$port/health > /dev/null && break; sleep 1; done
  for conc in 128:384 256:768; do
    timeout -k 5 90 python3 -m quickmoe bench serve --base-url http://127.0.0.1:$port --concurrency "${conc%%:*}" \
      --input-len 1000 --output-len 256 --num-prompts "${conc#*:}" > "$OUT/serve_${tag}_${conc%%:*}.txt" 2>&1
  done
  kill -TERM $server; wait $server
  { echo "-- $tag (gpu $gpu)"; for c in 128 256; do grep -h -A1 "conc    ok" "$OUT/serve_${tag}_$c.txt"
    grep -E "server steps" "$OUT/serve_${tag}_$c.txt" | tail -1; done; } > "$OUT/part_$tag.txt"
}
one new 0 8011 1 & p=$!; one base 1 8012 1; wait $p
cat "$OUT/part_new_r1.txt" "$OUT/part_base_r1.txt" >> "$OUT/summary.txt"
if [ $(( $(date +%s) - t0 )) -lt 250 ]; then
  one base 0 8011 2 & p=$!; one new 1 8012 2; wait $p
  cat "$OUT/part_base_r2.txt" "$OUT/part_new_r2.txt" >> "$OUT/summary.txt"
fi
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
