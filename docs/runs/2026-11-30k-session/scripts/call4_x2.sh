#!/usr/bin/env bash
# Session 2026-11-30k call 4 (nvidia-h200-x2): the H200 files' gpt-oss-20b register-operand entries at keys 128 and
# 256 with two K steps a stage (new, the work tree) against 65bc3ab (base, .ab/base): bench moe in a graph, then
# bench generate 256 and 128 x 1000 -> 1000, new beside base on the two GPUs, then swapped.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make20.log" 2>&1 &
mk=$!
moe() {  # tree gpu
  local tree=$1 gpu=$2 root=$PWD s=$(date +%s); [ "$tree" != new ] && root=$PWD/.ab/$tree
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 10 150 \
    python3 -m quickmoe bench moe --shapes gpt-oss-20b --formats mxfp4 --tokens 64,128,192,256,384,512 --no-baselines \
    > "$OUT/moe_$tree.log" 2>&1
  { echo "-- bench moe $tree gpu $gpu: exit $? in $(( $(date +%s) - s )) s"; grep -E "^ *(64|128|192|256|384|512) " "$OUT/moe_$tree.log" | head -12; } > "$OUT/part_moe_$tree.txt"
  cat "$OUT/moe_$tree.log" >> "$OUT/moe_${tree}_all.log"; rm "$OUT/moe_$tree.log"
}
gen() {  # tree gpu prompts
  local tree=$1 gpu=$2 n=$3 root=$PWD s=$(date +%s); [ "$tree" != new ] && root=$PWD/.ab/$tree
  local tag=${n}_$tree
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 10 150 \
    python3 -m quickmoe bench generate /tmp/gpt-oss-20b --num-prompts $n --input-len 1000 --output-len 1000 \
    > "$OUT/gen_$tag.log" 2>&1
  { echo "-- gen $tag gpu $gpu: exit $? in $(( $(date +%s) - s )) s"
    grep -E "^quickmoe |^throughput run|by step kind|by op family|^decode at batch 1: median" "$OUT/gen_$tag.log" \
      | cut -c1-250; } > "$OUT/part_gen_$tag.txt"
  cat "$OUT/gen_$tag.log" >> "$OUT/gen_${tag}_all.log"; rm "$OUT/gen_$tag.log"
}
for round in 1 2; do
  if [ $round = 1 ]; then a=new b=base; else a=base b=new; fi
  moe $a 0 & p=$!; moe $b 1; wait $p
  cat "$OUT/part_moe_$a.txt" "$OUT/part_moe_$b.txt" >> "$OUT/summary.txt"
done
wait $mk; echo "20b checkpoint: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
for n in 256 128; do
  for round in 1 2; do
    [ $(( $(date +%s) - t0 )) -gt 480 ] && { echo "gen $n round $round: skipped (time)" >> "$OUT/summary.txt"; continue; }
    if [ $round = 1 ]; then a=new b=base; else a=base b=new; fi
    gen $a 0 $n & p=$!; gen $b 1 $n; wait $p
    cat "$OUT/part_gen_${n}_$a.txt" "$OUT/part_gen_${n}_$b.txt" >> "$OUT/summary.txt"
  done
done
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
