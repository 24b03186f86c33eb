#!/bin/bash
# Call 3 (2026-12-02 fifth session): served figures with prompt-step CUDA graphs (the default) and without
# (--cuda-graphs-prefill-tokens 0): quickmoe serve on Qwen3-30B-A3B FP8 and gpt-oss-20b, 20 s idle after /health
# (the idle work captures the graphs), then bench serve 1000 -> 256 at concurrency 1 (8 prompts) and 32 (96 prompts).
# First the GPU test fixed after call 2.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8 G=/tmp/g20
([ -d $Q ] || timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1
 echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
([ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "20b checkpoint ready rc $?" >> $OUT/make_g.log) &
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/models/test_prefill_graphs.py > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s): $(tail -1 $OUT/tests.log)"; grep -E "^(FAILED|ERROR)" $OUT/tests.log | head
wait; cat $OUT/make_q.log $OUT/make_g.log 2>/dev/null | grep rc
port=8020
for m in q g; do
  for t in graphs eager; do
    ck=$Q; [ $m = g ] && ck=$G
    extra=""; [ $t = eager ] && extra="--cuda-graphs-prefill-tokens 0"
    [ $SECONDS -gt 500 ] && { echo "skipping $m $t ($SECONDS s)"; continue; }
    port=$((port + 1))
    python3 -m quickmoe serve $ck --port $port $extra > $OUT/serve_${m}_$t.log 2>&1 &
    server=$!
    for _ in $(seq 240); do curl -sf localhost:$port/health > /dev/null && break; sleep 0.5; done
    sleep 20
    for conc in 1:8 32:96; do
      c=${conc%%:*}
      timeout 90 python3 -m quickmoe bench serve --base-url http://127.0.0.1:$port --concurrency $c \
        --num-prompts ${conc##*:} --input-len 1000 --output-len 256 --result-json $OUT/bench_${m}_${t}_c$c.json \
        > $OUT/bench_${m}_${t}_c$c.txt 2>&1
      echo "$m $t concurrency $c rc $? ($SECONDS s)"
      grep -iE 'output token throughput|median (itl|ttft)|failed' $OUT/bench_${m}_${t}_c$c.txt | tr '\n' ' '; echo
    done
    kill -TERM $server; wait $server
    grep -iE 'prompt steps|graphs of prompt' $OUT/serve_${m}_$t.log | head -3
  done
done
echo "($SECONDS s)"
