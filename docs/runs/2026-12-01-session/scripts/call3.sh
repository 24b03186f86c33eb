#!/bin/bash
# Call 3 (2026-12-01 session, issue 15): (a) what the paging costs decode attention at the large points where SDPA
# leads by 2-3%: bench attention's full layers with cache blocks of 16 (the default), 32 and 64 positions, blocks in
# random order as the bench lays them; (b) the prefill tile of 64 rows (8 queries x the group of 8) against the
# committed 128 (16 queries), 2-4 stages, 4 warps, bits against the default.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
for round in 1 2; do
  for bs in 16 64 32; do
    timeout 90 python3 -m quickmoe bench attention --batches 8,64,256 --contexts 4096,16384 --windows 0 --prefill "" \
      --block-size $bs > $OUT/decode_bs${bs}_r$round.txt 2>&1
    echo "block size $bs round $round rc $? ($SECONDS s)"
  done
done
for bs in 16 32 64; do
  echo "== block size $bs"; grep -E '^ +[0-9]+ +[0-9]+ +0 ' $OUT/decode_bs${bs}_r*.txt
done
timeout 240 python3 scripts/probes/prefill_attention_sweep.py --block-q 8,16 --block-n 64 --warps 4 --stages 2,3,4 \
  --orders 1 --json $OUT/prefill_sweep.json > $OUT/prefill_sweep.log 2>&1
echo "prefill sweep rc $? ($SECONDS s)"; grep -E '^\||default vs' $OUT/prefill_sweep.log
