#!/usr/bin/env bash
# Session 2026-11-29h, call 4 (issue 18, Qwen3 FP8 decode): Qwen3's 128-expert router through router_route at up to
# 256 tokens (the work tree) against the stacked-QKV tree (.ab/base): the router tests on CUDA, the router probe's
# table, Qwen3-30B-A3B FP8's bench generate in turns, then quickmoe serve + bench serve (1000 -> 256, c = 1, 32).
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_router.py > "$OUT/tests.log" 2>&1
echo "tests: $(tail -1 "$OUT/tests.log") ($SECONDS s)"; grep -E '^(FAILED|ERROR)|^E  ' "$OUT/tests.log" | head -8
timeout 90 python3 scripts/probes/router_probe.py --sweep '' --no-dense > "$OUT/router_probe.txt" 2>&1
echo "router probe exit $? ($SECONDS s)"; grep qwen3 "$OUT/router_probe.txt" | head -8
python3 -m quickmoe make-checkpoint /tmp/q3fp8 --preset qwen3-30b-a3b --weights fp8 -q > "$OUT/make_q3fp8.log" 2>&1
echo "checkpoint: exit $? ($SECONDS s)"
gen() {  # tree turn
  [ $SECONDS -gt 330 ] && { echo "skipping gen $1 $2: $SECONDS s gone"; return; }
  local root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  local log="$OUT/gen_q3fp8_$1_$2.log"
  PYTHONPATH=/tmp/site:$root/src timeout 110 python3 -m quickmoe bench generate /tmp/q3fp8 --num-prompts 64 \
    --input-len 1000 --output-len 64 --json "$OUT/gen_q3fp8_$1_$2.json" > "$log" 2>&1
  echo "-- gen $1 $2 exit $? ($SECONDS s)"
  grep -E '^decode at batch 1: median|^decode step at batch|^throughput run by step' "$log" | cut -c1-260
}
gen new a; gen base a; gen new b; gen base b
if [ $SECONDS -lt 400 ]; then
  python3 -m quickmoe serve /tmp/q3fp8 --port 8018 > "$OUT/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 150); do curl -sf localhost:8018/health > /dev/null && break; sleep 1; done
  echo "server healthy at $SECONDS s"
  timeout $((570 - SECONDS)) python3 -m quickmoe bench serve --base-url http://127.0.0.1:8018 --concurrency 1,32 \
    --input-len 1000 --output-len 256 --result-json "$OUT/serve.json" > "$OUT/bench_serve.txt" 2>&1
  echo "bench serve exit $? ($SECONDS s)"; grep -A3 "conc    ok" "$OUT/bench_serve.txt"
  kill -TERM "$server"; wait "$server"
fi
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
