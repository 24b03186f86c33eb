#!/usr/bin/env bash
# Session 2026-11-29e, call 3: Qwen3-30B-A3B bf16's new H200 files (8-row tiles at T = 1-24): GPU tests, bench moe
# in turns against .ab/base (no dense file: the fallback), then a 12-layer bf16 Qwen3's decode steps in turns.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
(python3 -m quickmoe make-checkpoint /tmp/q3bf16 --preset qwen3-30b-a3b --weights bf16 --layers 12 -q > "$OUT/make_q3bf16.log" 2>&1
 echo "made: exit $?" >> "$OUT/make_q3bf16.log") &
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_fused_moe_quantized.py tests/kernels/test_fused_moe.py \
  -k "(shipped and qwen3 and bf16) or (eight_row_tiles_give and bf16)" > "$OUT/bf16_tests.log" 2>&1
echo "bf16 tests: exit $?, $(tail -1 "$OUT/bf16_tests.log") ($SECONDS s)"
for turn in "new a" "base a" "new b" "base b"; do
  set -- $turn
  root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  PYTHONPATH=/tmp/site:$root/src timeout 90 python3 -m quickmoe bench moe --shapes qwen3-30b-a3b --formats bf16 \
    --tokens 1,2,3,4,6,8,12,16,24,32 --no-baselines -q --json "$OUT/bench_moe_$1_$2.json" > "$OUT/bench_moe_$1_$2.txt" 2>&1
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
wait; echo "checkpoint: $(tail -1 "$OUT/make_q3bf16.log") ($SECONDS s)"
gen() {  # tree turn
  [ $SECONDS -gt 480 ] && { echo "skipping gen $1 $2: $SECONDS s gone"; return; }
  local root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  local log="$OUT/gen_q3bf16_$1_$2.log"
  PYTHONPATH=/tmp/site:$root/src timeout 110 python3 -m quickmoe bench generate /tmp/q3bf16 --num-prompts 32 --input-len 1000 \
    --output-len 64 --json "$OUT/gen_q3bf16_$1_$2.json" > "$log" 2>&1
  echo "-- gen $1 $2 exit $? ($SECONDS s)"
  grep -E '^decode at batch 1:|^throughput run:|^decode step at batch [0-9]+ by op' "$log" | cut -c1-170
}
gen new a; gen base a; gen new b; gen base b
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
