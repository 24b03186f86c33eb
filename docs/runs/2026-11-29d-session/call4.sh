#!/usr/bin/env bash
# Session 2026-11-29d, call 4: the new H200 MoE entries between their keys (bench moe at T the nearest-key rule sends to
# a changed entry or past it), then the whole models again in turns against .ab/base (HEAD: the committed files):
# Qwen3-30B-A3B NVFP4 and gpt-oss-120b (12 layers) at batch 1 and 32, gpt-oss-20b at batch 128.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
(python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make_20b.log" 2>&1; echo "made: exit $?" >> "$OUT/make_20b.log"
 python3 -m quickmoe make-checkpoint /tmp/g120 --preset gpt-oss-120b --layers 12 -q > "$OUT/make_120b.log" 2>&1; echo "made: exit $?" >> "$OUT/make_120b.log") &
(python3 -m quickmoe make-checkpoint /tmp/q3nvfp4 --preset qwen3-30b-a3b --weights nvfp4 -q > "$OUT/make_q3.log" 2>&1; echo "made: exit $?" >> "$OUT/make_q3.log") &
for run in new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  for spec in "gpt-oss-120b:mxfp4:48,80,96" "qwen3-30b-a3b:nvfp4:48,80,96" "mixtral-8x7b:nvfp4:24,40,48" "gpt-oss-20b:mxfp4:96,160,192"; do
    IFS=: read -r shape fmt tokens <<< "$spec"
    PYTHONPATH=/tmp/site:$root/src timeout 60 python3 -m quickmoe bench moe --shapes $shape --formats $fmt --tokens $tokens \
      --no-baselines -q --json "$OUT/between_${shape}_$run.json" > "$OUT/between_${shape}_$run.txt" 2>&1
  done
  echo "-- bench moe between keys, $run ($SECONDS s)"
done
python3 - "$OUT" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(f"{out}/between_*.json")):
    tag = os.path.basename(f)[:-5].rsplit("_", 1)[1]
    for r in json.load(open(f))["rows"]:
        rows.setdefault((r["shape"], r["format"], r["tokens"]), {})[tag] = r["quickmoe_graph_s"] * 1e6
for key, v in sorted(rows.items()):
    print(*key, f"new {v.get('new', 0):.1f} base {v.get('base', 0):.1f} ratio {v.get('new', 0) / v.get('base', 1):.3f}")
PY
wait; echo "checkpoints: $(tail -1 "$OUT/make_20b.log") / $(tail -1 "$OUT/make_120b.log") / $(tail -1 "$OUT/make_q3.log") ($SECONDS s)"
gen() {  # checkpoint, tree, prompts, turn
  [ $SECONDS -gt 420 ] && { echo "skipping $1 $2 $4: $SECONDS s gone"; return; }
  local root=$PWD; [ "$2" != new ] && root=$PWD/.ab/$2
  local log="$OUT/gen_$1_$2_n$3_$4.log"
  PYTHONPATH=/tmp/site:$root/src timeout 70 python3 -m quickmoe bench generate /tmp/$1 --num-prompts $3 --input-len 1000 \
    --output-len 64 --json "$OUT/gen_$1_$2_n$3_$4.json" > "$log" 2>&1
  echo "-- $1 $2 n$3 $4 exit $? ($SECONDS s)"
  grep -E '^decode at batch 1: median|^throughput run:|^decode step at batch [0-9]+ by op' "$log" | cut -c1-150
}
gen q3nvfp4 base 32 a; gen q3nvfp4 new 32 a; gen g120 new 32 a; gen g120 base 32 a; gen gpt-oss-20b new 128 a
gen gpt-oss-20b base 128 a; gen q3nvfp4 new 32 b; gen q3nvfp4 base 32 b; gen g120 base 32 b; gen g120 new 32 b
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | head -3
