#!/usr/bin/env bash
# Session 2026-11-29d, call 2: the new H200 MoE entries (8-row tiles for the 120b's MXFP4 and the families' NVFP4 at
# decode sizes; the 20b's T = 128 transposed), checked: the GPU tests of the shipped configs, bench moe of the
# whole layer in turns against .ab/base (HEAD: the committed files), the 20b's batch-128 decode step in turns.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
(python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make.log" 2>&1; echo "made: exit $?" >> "$OUT/make.log") &
python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe_quantized.py tests/kernels/test_fused_moe.py \
  -k "shipped or gpt_oss_20b_shapes or eight_row" > "$OUT/moe_tests.log" 2>&1
echo "tests: $(tail -1 "$OUT/moe_tests.log") ($SECONDS s)"; grep -E '^(FAILED|ERROR)' "$OUT/moe_tests.log" | head
for turn in "new a" "base a" "new b" "base b"; do
  set -- $turn
  [ $SECONDS -gt 330 ] && { echo "stopping bench moe: $SECONDS s gone"; break; }
  root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe bench moe --shapes gpt-oss-120b,qwen3-30b-a3b,mixtral-8x7b,gpt-oss-20b \
    --formats mxfp4,nvfp4 --tokens 1,2,4,8,16,32,64,128 --no-baselines --json "$OUT/bench_moe_$1_$2.json" \
    > "$OUT/bench_moe_$1_$2.txt" 2>&1
  echo "-- bench moe $1 $2 exit $? ($SECONDS s)"
done
wait; echo "checkpoint: $(tail -1 "$OUT/make.log") ($SECONDS s)"
for turn in "new a" "base a" "new b" "base b"; do
  set -- $turn
  [ $SECONDS -gt 520 ] && { echo "stopping generate: $SECONDS s gone"; break; }
  root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe bench generate /tmp/gpt-oss-20b --num-prompts 128 --input-len 1000 \
    --output-len 64 --json "$OUT/gen128_$1_$2.json" > "$OUT/gen128_$1_$2.log" 2>&1
  echo "-- generate 128 x 1000 -> 64 $1 $2 exit $? ($SECONDS s): $(grep -E '^throughput run:|^decode step at batch 1[0-9]|^quickmoe ' "$OUT/gen128_$1_$2.log" | cut -c1-200 | head -4 | tr '\n' ' ')"
done
python3 - "$OUT" <<'PY'
import json, sys, glob, os, statistics
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(f"{out}/bench_moe_*.json")):
    tag = os.path.basename(f)[10:-5]
    for r in json.load(open(f))["rows"]:
        rows.setdefault((r["shape"], r["format"], r["tokens"]), {})[tag] = (r["quickmoe_graph_s"] * 1e6, r["hbm_gb_per_s"])
print("shape format T: in-graph us new a / new b | base a / base b | new/base (medians) | GB/s new")
for key, v in sorted(rows.items()):
    new = [v[t][0] for t in v if t.startswith("new")]; base = [v[t][0] for t in v if t.startswith("base")]
    ratio = statistics.median(new) / statistics.median(base) if new and base else float("nan")
    gbs = statistics.median([v[t][1] for t in v if t.startswith("new")]) if new else float("nan")
    print(*key, " / ".join(f"{x:.1f}" for x in new), "|", " / ".join(f"{x:.1f}" for x in base), f"| {ratio:.3f} | {gbs:.0f}")
PY
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | head -5
