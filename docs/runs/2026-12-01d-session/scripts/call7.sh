#!/bin/bash
# Call 7 (2026-12-01 fourth session; run inline, written here as it ran): the prefill sweep of 1 and 2 stages, 4 and 8
# warps, capped or not, for Qwen3-30B-A3B's and Mixtral's heads (128 wide) on e75b243.
source scripts/device/env.sh
for shape in qwen3:32,4,128:8,16 mixtral:32,8,128:16,32; do
  h=${shape#*:}
  timeout 140 python3 scripts/probes/prefill_attention_sweep.py --heads ${h%:*} --block-q ${h##*:} --block-n 64 \
    --warps 4,8 --stages 1,2 --orders 1 --maxnreg 0,128 --json $OUT/d128_${shape%%:*}.json > $OUT/d128_${shape%%:*}.log 2>&1
  echo "${shape%%:*} rc $? ($SECONDS s)"; grep '^|' $OUT/d128_${shape%%:*}.log | head -8
done
