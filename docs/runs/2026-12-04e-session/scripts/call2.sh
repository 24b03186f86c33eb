#!/bin/bash
# Call 2 (2026-12-04 fifth session, issues 15 and 18): prompt-step graphs up to 8,192 tokens against the default 2,048,
# served. `quickmoe serve` (defaults, and --cuda-graphs-prefill-tokens 8192), the idle work left to finish (the
# "captured N CUDA graphs of prompt steps" line, at most 60 s), then `bench serve` 1000 -> 256 at concurrency 32 (96
# prompts): Qwen3-30B-A3B FP8 and gpt-oss-20b, in turns.
# Why: call 1 found bench generate's 8,192-token mixed steps GPU-bound either way (level), but in a server requests
# arrive a few at a time and the steps with prompt tokens hold 2-8k tokens; eagerly the host takes ~80 ms to launch
# Qwen3's 792 kernels whatever the size (2026-12-02 fifth session: mixed steps "host-bound at ~88-91 ms").
# Prediction: Qwen3 FP8 mixed steps' device ms -15 to -40% (from ~85 ms), output tok/s +3-8%, TTFT median -10 to -25%;
# gpt-oss-20b (362 kernels, ~36 ms of host a step) level within +-2%.
source scripts/device/env.sh
base=$OUT
trap 'cd $base && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
G=/tmp/g20 Q=/tmp/qwen3-fp8
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
([ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "g20 rc $?" >> $OUT/make_g.log
 [ -d $Q ] || timeout 240 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q \
   > $OUT/make_q.log 2>&1
 echo "qwen3 rc $?" >> $OUT/make_q.log) &
maker=$!
port=8040
serve_one() {  # MODEL_TAG PREFILL_TOKENS ROUND
  local ck=$Q; [ $1 = g ] && ck=$G
  local tag=$1_$2_r$3
  port=$((port + 1))
  python3 -m quickmoe serve $ck --port $port --cuda-graphs-prefill-tokens $2 > $OUT/serve_$tag.log 2>&1 &
  local server=$! t0=$SECONDS
  for _ in $(seq 240); do curl -sf localhost:$port/health > /dev/null && break; sleep 0.5; done
  local ready=$((SECONDS - t0))
  for _ in $(seq 120); do grep -q "CUDA graphs of prompt steps" $OUT/serve_$tag.log && break; sleep 0.5; done
  sleep 2
  timeout 90 python3 -m quickmoe bench serve --base-url http://127.0.0.1:$port --concurrency 32 --num-prompts 96 \
    --input-len 1000 --output-len 256 --result-json $OUT/bench_$tag.json > $OUT/bench_$tag.txt 2>&1
  echo "$tag rc $? (health ${ready} s, at $SECONDS s): $(grep -iE 'output token throughput|median (itl|ttft)|failed' \
    $OUT/bench_$tag.txt | tr -s ' ' | tr '\n' ';')"
  grep -iE 'steps|device' $OUT/bench_$tag.txt | head -4
  kill -TERM $server; wait $server
  grep -oE 'captured [0-9]+ CUDA graphs of prompt steps.*|could not capture.*' $OUT/serve_$tag.log | head -2
}
until grep -q "g20 rc" $OUT/make_g.log 2>/dev/null; do sleep 2; done; tail -1 $OUT/make_g.log
serve_one g 8192 1; serve_one g 2048 1
wait $maker; tail -1 $OUT/make_q.log
serve_one q 2048 1; serve_one q 8192 1
[ $SECONDS -lt 420 ] && { serve_one q 8192 2; serve_one q 2048 2; }
echo "done ($SECONDS s)"
