#!/usr/bin/env bash
# Session 2026-11-30j call 2 (nvidia-h200-x2): quickmoe serve (defaults) of the work tree (new: block tables from
# numpy rows, the MoE warm-up on one thread) against db00a47 (base, .ab/base), gpt-oss-20b. Per tree: a start on an
# empty QUICKMOE_CACHE_DIR (launch -> /health 200 timed from outside), bench serve 1000 -> 256 at concurrency 128
# (384 prompts) and 256 (768), stop; a second start on the cache the first left (launch -> /health), stop. New on
# GPU 0 beside base on GPU 1, then swapped. Then the frontend probe (no GPU) at concurrency 256, both trees.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make20.log" 2>&1
python3 -m quickmoe make-checkpoint /tmp/tiny --preset tiny -q >> "$OUT/make20.log" 2>&1
ready() {  # port server-pid -> seconds from $2 until /health 200 (or "failed")
  for _ in $(seq 2400); do
    curl -sf localhost:$1/health > /dev/null && { python3 -c "import time; print(round(time.time() - $3, 2))"; return; }
    kill -0 $2 2>/dev/null || { echo failed; return; }
    sleep 0.05
  done
  echo timeout
}
tree() { echo $1; for c in $(pgrep -P $1); do tree $c; done; }
cpu() {  # pid -> "pid:name:cpu-seconds" of it and every descendant (utime + stime)
  local tick=$(getconf CLK_TCK)
  for p in $(tree $1); do
    [ -r /proc/$p/stat ] && awk -v p=$p -v t=$tick '{printf "%s:%s:%.2f ", p, $2, ($14 + $15) / t}' /proc/$p/stat
  done
}
one() {  # tree gpu port round
  local tree=$1 gpu=$2 port=$3 round=$4
  local root=$PWD; [ "$tree" != new ] && root=$PWD/.ab/$tree
  local tag=${tree}_r$round cache=/tmp/qc-$tree-$gpu-r$round
  rm -rf $cache
  local s=$(date +%s.%N)
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=$cache PYTHONPATH=/tmp/site:$root/src timeout -k 10 240 \
    python3 -m quickmoe serve /tmp/gpt-oss-20b --port $port > "$OUT/server_${tag}_fresh.log" 2>&1 &
  local server=$!
  local fresh=$(ready $port $server $s)
  for conc in 128:384 256:768; do
    local before=$(cpu $server) b0=$(date +%s.%N)
    timeout -k 5 90 python3 -m quickmoe bench serve --base-url http://127.0.0.1:$port --concurrency "${conc%%:*}" \
      --input-len 1000 --output-len 256 --num-prompts "${conc#*:}" > "$OUT/serve_${tag}_${conc%%:*}.txt" 2>&1
    echo "cpu seconds over the run of $(python3 -c "import time; print(round(time.time() - $b0, 2))") s: before [$before] after [$(cpu $server)]" \
      >> "$OUT/serve_${tag}_${conc%%:*}.txt"
  done
  kill -TERM $server; while kill -0 $server 2>/dev/null; do sleep 0.2; done
  s=$(date +%s.%N)
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=$cache PYTHONPATH=/tmp/site:$root/src timeout -k 10 120 \
    python3 -m quickmoe serve /tmp/gpt-oss-20b --port $port > "$OUT/server_${tag}_warm.log" 2>&1 &
  server=$!
  local warm=$(ready $port $server $s)
  sleep 3
  kill -TERM $server; while kill -0 $server 2>/dev/null; do sleep 0.2; done
  { echo "-- $tag (gpu $gpu): /health 200 after ${fresh} s (empty cache), ${warm} s (warm cache)"
    for c in 128 256; do grep -h -A1 "conc    ok" "$OUT/serve_${tag}_$c.txt"
    grep -E "server steps|cpu seconds" "$OUT/serve_${tag}_$c.txt" | tail -2; done
    grep -hE "ERROR|Traceback|idle work failed|took .* to queue" "$OUT"/server_${tag}_*.log | head -5; } > "$OUT/part_$tag.txt"
}
one new 0 8011 1 & p=$!; one base 1 8012 1; wait $p
cat "$OUT/part_new_r1.txt" "$OUT/part_base_r1.txt" >> "$OUT/summary.txt"
one base 0 8011 2 & p=$!; one new 1 8012 2; wait $p
cat "$OUT/part_base_r2.txt" "$OUT/part_new_r2.txt" >> "$OUT/summary.txt"
echo "servers done at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
if [ $(( $(date +%s) - t0 )) -lt 420 ]; then
  for step in 10 20; do
    timeout -k 5 100 python3 scripts/probes/frontend_probe.py /tmp/tiny --concurrency 256 --num-prompts 768 \
      --input-len 1000 --output-len 256 --step-ms $step --profile > "$OUT/frontend_$step.log" 2>&1
    { echo "-- frontend probe, steps of $step ms: exit $?"; grep -E "conc    ok" -A1 "$OUT/frontend_$step.log"
      grep -E "step core|Mean ITL|Median TPOT|client used" "$OUT/frontend_$step.log"; } >> "$OUT/summary.txt"
  done
fi
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
