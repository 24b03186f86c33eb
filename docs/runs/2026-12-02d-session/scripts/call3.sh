#!/bin/bash
# Call 3 (2026-12-02 fourth session, issue 18): on the tree (q/k norms and o_proj's quantizer inside the decode
# attention), the Qwen3 FP8 kernel-count tests on CUDA, then quickmoe serve (defaults) on Qwen3-30B-A3B FP8 and
# bench serve 1000 -> 256 at concurrency 1 (8 prompts) and 32 (96 prompts).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8
(timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1;
 echo "qwen3 checkpoint rc $?" >> $OUT/make_q.log) &
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/models/test_kernel_count.py > $OUT/test_count.log 2>&1
echo "kernel-count tests rc $? ($SECONDS s): $(tail -1 $OUT/test_count.log)"; grep -E "^(FAILED|ERROR)" $OUT/test_count.log
wait; grep rc $OUT/make_q.log
python3 -m quickmoe serve $Q --port 8012 -q > $OUT/serve.log 2>&1 &
server=$!
for _ in $(seq 240); do curl -sf localhost:8012/health > /dev/null && break; sleep 0.5; done
for conc in 1:8 32:96; do
  timeout 120 python3 -m quickmoe bench serve --base-url http://127.0.0.1:8012 --concurrency ${conc%%:*} \
    --num-prompts ${conc##*:} --input-len 1000 --output-len 256 --result-json $OUT/bench${conc%%:*}.json \
    > $OUT/bench${conc%%:*}.txt 2>&1
  echo "bench serve concurrency ${conc%%:*} rc $? ($SECONDS s)"
  grep -iE 'output token throughput|median (itl|tpot|ttft)|failed' $OUT/bench${conc%%:*}.txt
done
kill -TERM $server; wait $server
echo "($SECONDS s)"
