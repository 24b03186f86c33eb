#!/bin/bash
# Call 4 (2026-12-02 fifth session): the flat prefill-attention grid and prompt-step graphs of up to 256 sequences
# (48b113b+). GPU tests; `bench attention` prefill points, the session's start (146f704, .ab/base) and the tree in
# turns; then quickmoe serve on Qwen3-30B-A3B FP8 and gpt-oss-20b with prompt graphs (default) and without
# (--cuda-graphs-prefill-tokens 0), 30 s idle after /health, bench serve 1000 -> 256 at concurrency 1 and 32.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8 G=/tmp/g20
([ -d $Q ] || timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1
 echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
([ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "20b checkpoint ready rc $?" >> $OUT/make_g.log) &
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 6 tests/models/test_prefill_graphs.py \
  tests/kernels/test_attention_kernels.py tests/models/test_cuda_graphs.py -k "prefill or graph or Graph" \
  > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s): $(tail -1 $OUT/tests.log)"; grep -E "^(FAILED|ERROR)" $OUT/tests.log | head
for round in 1 2; do
  for t in base new; do
    root=$PWD; [ $t = base ] && root=$PWD/.ab/base
    PYTHONPATH=/tmp/site:$root/src timeout 60 python3 -m quickmoe bench attention --batches 1 --contexts 1024 \
      --windows 0 --prefill 1:1024,4:2048,1:8192,16:512,64:128 > $OUT/attn_r${round}_$t.log 2>&1
    echo "attention $t r$round rc $? ($SECONDS s)"; grep -iE "prefill|^ *[0-9]+ *x" $OUT/attn_r${round}_$t.log | head -8
  done
done
wait; cat $OUT/make_q.log $OUT/make_g.log 2>/dev/null | grep rc
port=8030
for m in q g; do
  for t in graphs eager; do
    ck=$Q; [ $m = g ] && ck=$G
    extra=""; [ $t = eager ] && extra="--cuda-graphs-prefill-tokens 0"
    [ $SECONDS -gt 480 ] && { echo "skipping $m $t ($SECONDS s)"; continue; }
    port=$((port + 1))
    python3 -m quickmoe serve $ck --port $port $extra > $OUT/serve_${m}_$t.log 2>&1 &
    server=$!
    for _ in $(seq 240); do curl -sf localhost:$port/health > /dev/null && break; sleep 0.5; done
    sleep 30
    for conc in 1:8 32:96; do
      c=${conc%%:*}
      timeout 90 python3 -m quickmoe bench serve --base-url http://127.0.0.1:$port --concurrency $c \
        --num-prompts ${conc##*:} --input-len 1000 --output-len 256 --result-json $OUT/bench_${m}_${t}_c$c.json \
        > $OUT/bench_${m}_${t}_c$c.txt 2>&1
      echo "$m $t concurrency $c rc $? ($SECONDS s)"
      grep -iE 'output token throughput|median (itl|ttft)|failed' $OUT/bench_${m}_${t}_c$c.txt | tr '\n' ' '; echo
    done
    kill -TERM $server; wait $server
    grep -iE 'graphs of prompt|could not capture' $OUT/serve_${m}_$t.log | head -3
  done
done
echo "($SECONDS s)"
