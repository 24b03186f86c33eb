#!/usr/bin/env bash
# Session 2026-11-30m call 2 (nvidia-h200-x2): the stage's weights as one box of 64 bytes a row, GEMM 2 capped at 128
# registers at 64-row tiles only (call 1 had both kernels capped at every tile: the 32-row tiles then took 105
# registers instead of 96), the work tree, against 3aa5711 (.ab/base). The probe (GEMM 1 + GEMM 2 alone in a graph)
# new on GPU 0 beside the 20b checkpoint on GPU 1, then base on GPU 0 beside new on GPU 1; bench moe 20b and 120b in
# turns; bench generate 64 and 256 x 1000 -> 1000 new beside base, then swapped.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
probe() {  # tree gpu
  local tree=$1 gpu=$2 root=$PWD; [ "$tree" != new ] && root=$PWD/.ab/$tree
  CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 5 150 python3 $root/scripts/probes/moe_register_rows_probe.py \
    --shapes gpt-oss-20b,gpt-oss-120b --tokens-20b 64,128,256,512,1024 --tokens-120b 256,512 --two-steps 32,64 \
    --variants tuned,reg32k2s2,reg64k2s2 > "$OUT/rows_$tree.txt" 2>&1
  echo "probe $tree gpu $gpu: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/rows_${tree}_all.txt"
  cat "$OUT/rows_$tree.txt" >> "$OUT/rows_${tree}_all.txt"; rm "$OUT/rows_$tree.txt"
}
moe() {  # tree gpu shape tokens
  local tree=$1 gpu=$2 shape=$3 tokens=$4 root=$PWD s=$(date +%s); [ "$tree" != new ] && root=$PWD/.ab/$tree
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 10 150 \
    python3 -m quickmoe bench moe --shapes $shape --formats mxfp4 --tokens $tokens --no-baselines \
    > "$OUT/moe_${shape}_$tree.log" 2>&1
  { echo "-- bench moe $shape $tree gpu $gpu: exit $? in $(( $(date +%s) - s )) s"; grep -E "^ *(64|128|256|512|1024) " "$OUT/moe_${shape}_$tree.log" | head -12; } >> "$OUT/moe_summary.txt"
  cat "$OUT/moe_${shape}_$tree.log" >> "$OUT/moe_${shape}_${tree}_all.log"; rm "$OUT/moe_${shape}_$tree.log"
}
gen() {  # tree gpu prompts
  local tree=$1 gpu=$2 n=$3 root=$PWD s=$(date +%s); [ "$tree" != new ] && root=$PWD/.ab/$tree
  local tag=${n}_$tree
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 10 150 \
    python3 -m quickmoe bench generate /tmp/gpt-oss-20b --num-prompts $n --input-len 1000 --output-len 1000 \
    > "$OUT/gen_$tag.log" 2>&1
  { echo "-- gen $tag gpu $gpu: exit $? in $(( $(date +%s) - s )) s"
    grep -E "^quickmoe |^throughput run|by op family|^decode at batch 1: median" "$OUT/gen_$tag.log" \
      | cut -c1-250; } > "$OUT/part_gen_$tag.txt"
  cat "$OUT/gen_$tag.log" >> "$OUT/gen_${tag}_all.log"; rm "$OUT/gen_$tag.log"
}
probe new 0 & p=$!
CUDA_VISIBLE_DEVICES=1 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make20.log" 2>&1
echo "20b checkpoint: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
wait $p
probe base 0 & p=$!; probe new 1; wait $p
grep -hE "^probe|^gpt-oss.*T .*:.*=|Error" "$OUT"/rows_*_all.txt | cut -c1-300 >> "$OUT/summary.txt"
moe new 0 gpt-oss-20b 64,128,256,512,1024 & p=$!; moe base 1 gpt-oss-20b 64,128,256,512,1024; wait $p
moe base 0 gpt-oss-120b 128,256,512,1024 & p=$!; moe new 1 gpt-oss-120b 128,256,512,1024; wait $p
cat "$OUT/moe_summary.txt" >> "$OUT/summary.txt"
for n in 64 256; do
  for round in 1 2; do
    [ $(( $(date +%s) - t0 )) -gt 480 ] && { echo "gen $n round $round: skipped (time)" >> "$OUT/summary.txt"; continue; }
    if [ $round = 1 ]; then a=new b=base; else a=base b=new; fi
    gen $a 0 $n & p=$!; gen $b 1 $n; wait $p
    cat "$OUT/part_gen_${n}_$a.txt" "$OUT/part_gen_${n}_$b.txt" >> "$OUT/summary.txt"
  done
done
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
