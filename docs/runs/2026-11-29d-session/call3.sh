#!/usr/bin/env bash
# Session 2026-11-29d, call 3: the new H200 MoE entries checked as a whole MoE layer (bench moe, in turns against
# .ab/base = HEAD with the committed files) and in whole models: gpt-oss-20b's batch-128 decode step (T = 128 entry),
# Qwen3-30B-A3B NVFP4's batch-1 and batch-32 decode steps (8-row tiles at T = 1-64).
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
(python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make_20b.log" 2>&1; echo "made: exit $?" >> "$OUT/make_20b.log"
 python3 -m quickmoe make-checkpoint /tmp/q3nvfp4 --preset qwen3-30b-a3b --weights nvfp4 -q > "$OUT/make_q3.log" 2>&1; echo "made: exit $?" >> "$OUT/make_q3.log") &
for turn in "new a" "base a" "new b" "base b"; do
  set -- $turn
  [ $SECONDS -gt 190 ] && { echo "stopping bench moe: $SECONDS s gone"; break; }
  root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  PYTHONPATH=/tmp/site:$root/src timeout 120 python3 -m quickmoe bench moe --shapes gpt-oss-120b,qwen3-30b-a3b,mixtral-8x7b,gpt-oss-20b \
    --formats mxfp4,nvfp4 --tokens 1,2,4,8,16,32,64,128 --no-baselines -q --json "$OUT/bench_moe_$1_$2.json" \
    > "$OUT/bench_moe_$1_$2.txt" 2>&1
  echo "-- bench moe $1 $2 exit $? ($SECONDS s)"
done
python3 - "$OUT" <<'PY'
import json, sys, glob, os, statistics
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(f"{out}/bench_moe_*.json")):
    tag = os.path.basename(f)[10:-5]
    for r in json.load(open(f))["rows"]:
        rows.setdefault((r["shape"], r["format"], r["tokens"]), {})[tag] = (r["quickmoe_graph_s"] * 1e6, r["hbm_gb_per_s"])
print("shape format T: in-graph us new | base | new/base (medians) | GB/s new")
for key, v in sorted(rows.items()):
    new = [v[t][0] for t in v if t.startswith("new")]; base = [v[t][0] for t in v if t.startswith("base")]
    ratio = statistics.median(new) / statistics.median(base) if new and base else float("nan")
    gbs = statistics.median([v[t][1] for t in v if t.startswith("new")]) if new else float("nan")
    print(*key, " / ".join(f"{x:.1f}" for x in new), "|", " / ".join(f"{x:.1f}" for x in base), f"| {ratio:.3f} | {gbs:.0f}")
PY
wait; echo "checkpoints: $(tail -1 "$OUT/make_20b.log") / $(tail -1 "$OUT/make_q3.log") ($SECONDS s)"
gen() {  # checkpoint, tree, prompts
  [ $SECONDS -gt 490 ] && { echo "skipping $1 $2: $SECONDS s gone"; return; }
  local root=$PWD; [ "$2" != new ] && root=$PWD/.ab/$2
  local log="$OUT/gen_$1_$2_n$3.log"
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench generate /tmp/$1 --num-prompts $3 --input-len 1000 \
    --output-len 64 --json "$OUT/gen_$1_$2_n$3.json" > "$log" 2>&1
  echo "-- $1 $2 n$3 exit $? ($SECONDS s)"
  grep -E '^decode at batch 1:|^throughput run:|^decode step at batch [0-9]+ by op' "$log" | cut -c1-170
}
gen gpt-oss-20b base 128; gen gpt-oss-20b new 128; gen q3nvfp4 new 32; gen q3nvfp4 base 32
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | head -3
