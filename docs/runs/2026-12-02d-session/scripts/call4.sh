#!/bin/bash
# Call 4 (2026-12-02 fourth session, issue 15): gpt-oss-20b on the tree against the session's start (128cb37,
# .ab/main): bench generate 16 x 1000 -> 128 in turns, two rounds (the decode attention's new arguments must not move
# it), then the issue-15 headline on the tree, bench generate 256 x 1000 -> 1000, defaults, once.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
G=/tmp/g20
[ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
echo "checkpoint ready ($SECONDS s)"
for round in 1 2; do
  for t in main new; do
    root=$PWD; [ $t != new ] && root=$PWD/.ab/$t
    PYTHONPATH=/tmp/site:$root/src timeout 75 python3 -m quickmoe bench generate $G \
      --num-prompts 16 --input-len 1000 --output-len 128 > $OUT/gen_g_r${round}_$t.log 2>&1
    echo "round $round $t rc $? ($SECONDS s)"
    grep -E "^quickmoe |decode at batch 1: median|^throughput run: GPU" $OUT/gen_g_r${round}_$t.log | cut -c1-160
  done
done
timeout 150 python3 -m quickmoe bench generate $G --num-prompts 256 --input-len 1000 --output-len 1000 \
  > $OUT/gen_g_256.log 2>&1
echo "headline rc $? ($SECONDS s)"
grep -E "^quickmoe |decode at batch 1: median|^throughput run: GPU" $OUT/gen_g_256.log | cut -c1-200
echo "($SECONDS s)"
