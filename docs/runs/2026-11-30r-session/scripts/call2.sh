#!/bin/bash
# Call 2 (2026-11-30 eighteenth session, issue 15): prefill attention with its longest query tiles first (the work
# tree: 3 stages; .ab/s4: 4 stages) against 80d8b22 (.ab/base): attention kernel tests + bf16 quality tests on CUDA,
# bench attention in turns, and the prefill sweep's longest-first launches again (the spread of 3 vs 4 stages).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 150 python3 scripts/probes/prefill_attention_sweep.py --block-q 16 --block-n 64 --warps 4 \
  --stages 2,3,4,5 --orders 1,0 --reps 20 --json $OUT/prefill_sweep2.json > $OUT/prefill_sweep2.log 2>&1
echo "prefill sweep rc $? ($SECONDS s)"; tail -n 10 $OUT/prefill_sweep2.log
AB_RUNS="new base s4 new base s4" timeout 400 bash scripts/device/hotpath.sh ab-attention
echo "ab rc $? ($SECONDS s)"
for f in $OUT/bench_attention_*.log; do echo "== $f"; sed -n '/^prefill/,$p' $f; done
