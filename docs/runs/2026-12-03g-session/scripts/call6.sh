#!/bin/bash
# Call 6: what the collector's full passes scan once the heap is frozen (the default since 7f02a0c): gc_pauses.py
# (the commonest types at the first full pass after the last freeze) around `bench generate` of a 4-layer gpt-oss-20b,
# 256 x 1000 -> 1000, the defaults.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
M=/tmp/g20-4
timeout 120 python3 -m quickmoe make-checkpoint $M --preset gpt-oss-20b --layers 4 -q --overwrite > $OUT/make.log 2>&1
echo "checkpoint rc $? ($SECONDS s)"
timeout 150 python3 scripts/probes/gc_pauses.py bench generate $M --num-prompts 256 --input-len 1000 \
  --output-len 1000 --json $OUT/gen.json > $OUT/gen.log 2>&1
echo "generate rc $? ($SECONDS s)"; grep -v INFO $OUT/gen.log | grep "output tok/s" -A1; grep "full collector" $OUT/gen.log
python3 -c "import json; s = json.load(open('$OUT/gen.json'))['quickmoe']['steps']; print('idle_ms_total', s['idle_ms_total'])"
