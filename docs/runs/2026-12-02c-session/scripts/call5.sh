#!/bin/bash
# Call 5 (2026-12-02 third session): the issue-15 headline on main with this session's early triggers (3e49ea5):
# bench generate gpt-oss-20b 256 x 1000 -> 1000 with the defaults, then the same with QUICKMOE_PDL_EARLY=0.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
G=/tmp/g20
timeout 100 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
echo "20b checkpoint rc $? ($SECONDS s)"
for early in 1 0; do
  QUICKMOE_PDL_EARLY=$early timeout 80 python3 -m quickmoe bench generate $G --num-prompts 256 --input-len 1000 \
    --output-len 1000 --json $OUT/gen256_early$early.json > $OUT/gen256_early$early.log 2>&1
  echo "early $early rc $? ($SECONDS s)"
  grep -E "^quickmoe |decode at batch 1: median|throughput run: GPU" $OUT/gen256_early$early.log | cut -c1-160
done
