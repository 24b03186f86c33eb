#!/bin/bash
# Call 5: Qwen3-30B-A3B NVFP4 with call 3's tuned key 256 (the tree) against main (.ab/base, whose T = 256 takes
# key 128's config): bench generate 256 x 1000 -> 500 in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-nvfp4
rm -rf /tmp/qwen3-fp8
timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights nvfp4 -q --overwrite > $OUT/make_q.log 2>&1
echo "checkpoint rc $? ($SECONDS s)"
run() {  # tree prompts output-len tag
  local root=$PWD; [ $1 = base ] && root=$PWD/.ab/base
  PYTHONPATH=/tmp/site:$root/src timeout 80 python3 -m quickmoe bench generate $Q --num-prompts $2 --input-len 1000 \
    --output-len $3 --json $OUT/gen_$4_$1.json > $OUT/gen_$4_$1.log 2>&1
  echo "generate $4 $1 rc $? ($SECONDS s): $(grep -A1 'output tok/s' $OUT/gen_$4_$1.log | tail -1)"
}
run new 256 500 256a; run base 256 500 256a
[ $SECONDS -lt 220 ] && { run base 256 500 256b; run new 256 500 256b; }
echo "($SECONDS s)"
