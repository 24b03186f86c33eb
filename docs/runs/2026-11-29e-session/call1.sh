#!/usr/bin/env bash
# Session 2026-11-29e, call 1: Qwen3 FP8 8-row tiles at keys 4 and 8 (GPU tests, then bench moe in turns against
# .ab/base = HEAD); the 20b's build phase probed; coldstart2.sh load-plan (the loader's cached plan on CUDA).
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
(python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make_20b.log" 2>&1; echo "made: exit $?" >> "$OUT/make_20b.log"
 python3 -m quickmoe make-checkpoint /tmp/q3nvfp4 --preset qwen3-30b-a3b --weights nvfp4 -q > "$OUT/make_q3.log" 2>&1; echo "made: exit $?" >> "$OUT/make_q3.log") &
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_fused_moe_quantized.py tests/kernels/test_fused_moe.py \
  -k "(shipped and qwen3 and fp8) or (eight_row_tiles_give and fp8)" > "$OUT/fp8_tests.log" 2>&1
echo "fp8 tests: exit $?, $(tail -1 "$OUT/fp8_tests.log") ($SECONDS s)"
for turn in "new a" "base a" "new b" "base b"; do
  set -- $turn
  root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  PYTHONPATH=/tmp/site:$root/src timeout 90 python3 -m quickmoe bench moe --shapes qwen3-30b-a3b --formats fp8 \
    --tokens 1,2,3,4,6,8,10,12,16 --no-baselines -q --json "$OUT/bench_moe_$1_$2.json" > "$OUT/bench_moe_$1_$2.txt" 2>&1
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
timeout 60 python3 .ab/build_probe.py /tmp/gpt-oss-20b > "$OUT/build_probe.txt" 2>&1
echo "build probe: exit $?"; head -9 "$OUT/build_probe.txt"
timeout $((570 - SECONDS)) bash scripts/device/coldstart2.sh load-plan > "$OUT/load_plan_stage.log" 2>&1
echo "load-plan stage: exit $? ($SECONDS s)"
grep -E "^(loader tests|== |weights_ready|load |build |config |imports )|import torch alone|load plan|plan" "$OUT/load_plan_stage.log" | cut -c1-200
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
