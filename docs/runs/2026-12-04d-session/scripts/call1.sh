#!/bin/bash
# Call 1 (2026-12-04 fourth session, issue 18): the FP8 step factors one K step ahead, at the layer.
# Trees: work tree = HEAD (GEMM 1 ahead, 1776c53); .ab/pre = 1776c53^ (no factor ahead); .ab/g2 = branch
# next/fp8-gemm2-factors-ahead (0430cce: GEMM 2 ahead too, Qwen3's H200 down keys 1,024-8,192 capped at 168 registers).
# Prediction: HEAD against pre, the layer in a graph: Qwen3 T = 2,048-8,192 -1 to -2.5% (GEMM 1 alone -2.2 to -4%, about
# 60% of the layer), Mixtral T = 2,048 about -3% (GEMM 1 alone -5.7%); T = 16 level (8-row tiles, not ahead).
# g2 against HEAD: Qwen3 T = 2,048-8,192 -2 to -4% (the cap alone gave -1.9% at 8,192; ahead adds its share if the
# cap holds 168 registers without spills); Mixtral's down keys are not capped: a loss there if GEMM 2 ahead needs
# more than 168 registers (the sweep prints them).
# 1. GEMM 2 alone: moe_config_sweep --tuned-only --maxnreg 0,168 --registers, g2 and HEAD in turns;
# 2. bench moe FP8 Qwen3 + Mixtral, T = 16,1024,2048,4096,8192, three trees in rotating order, three rounds.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
path() { case $1 in head) echo /tmp/site:$PWD/src;; *) echo /tmp/site:$PWD/.ab/$1/src;; esac; }
sweep() {  # TREE SHAPE T
  PYTHONPATH=$(path $1):$PWD/scripts timeout 80 python3 scripts/probes/moe_config_sweep.py --shape $2 --format fp8 \
    --tokens $3 --tuned-only --maxnreg 0,168 --registers > $OUT/sweep_$2_$3_$1.log 2>&1
  echo "$1 $2 T=$3 rc $? ($SECONDS s): $(grep -E '^ +[0-9.]+ us' $OUT/sweep_$2_$3_$1.log | awk '{print $1}' | tr '\n' ' ')\
$(grep -E '^gemm[12]:' $OUT/sweep_$2_$3_$1.log | grep -o '[0-9]* registers, [0-9]* spilled' | tr '\n' ' ')"
}
sweep head qwen3-30b-a3b 8192; sweep g2 qwen3-30b-a3b 8192
sweep g2 mixtral-8x7b 2048; sweep head mixtral-8x7b 2048
orders=("pre head g2" "g2 pre head" "head g2 pre")
for round in 1 2 3; do
  for tree in ${orders[$((round - 1))]}; do
    PYTHONPATH=$(path $tree) timeout 110 python3 -m quickmoe bench moe --shapes qwen3-30b-a3b,mixtral-8x7b --formats fp8 \
      --tokens 16,1024,2048,4096,8192 --no-baselines -q --json $OUT/moe_${tree}_r$round.json \
      > $OUT/moe_${tree}_r$round.log 2>&1
    echo "bench moe $tree round $round rc $? ($SECONDS s)"
  done
done
python3 - <<'PY'
import json, glob, os, collections
out = os.environ["OUT"]
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for path in sorted(glob.glob(f"{out}/moe_*_r*.json")):
    tree, rnd = os.path.basename(path)[4:-5].split("_")
    data = json.load(open(path))
    fp8 = data["ceilings"].get("fp8_tflops", 0)
    print(os.path.basename(path), {k: round(v) for k, v in data["ceilings"].items()})
    for r in data["rows"]:
        rows[(r["shape"][:7], r["tokens"])][tree].append((r["quickmoe_graph_s"] * 1e6, r["tflops"] / fp8 * 100))
print("shape   T      tree: graph us per round (%mm)          median, vs pre")
for key in sorted(rows):
    med = {t: sorted(us for us, _ in v)[len(v) // 2] for t, v in rows[key].items()}
    for t in ("pre", "head", "g2"):
        v = rows[key].get(t, [])
        print(f"{key[0]} {key[1]:<5d} {t:4s} " + " ".join(f"{us:7.1f} ({p:4.1f})" for us, p in v)
              + f"   {med.get(t, 0):7.1f} {100 * (med.get(t, 0) / med['pre'] - 1):+5.1f}%")
PY
echo "($SECONDS s)"
