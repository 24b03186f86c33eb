#!/usr/bin/env bash
# Session 2026-11-30k call 6 (nvidia-h200-x2): the H200 files re-tuned with the two-step register twins (new, the
# work tree) against 65bc3ab (base): bench moe gpt-oss-20b and -120b in a graph, new beside base then swapped;
# bench generate 20b 64 x 1000 -> 1000 the same way; then the GPU tests of the tuned tiles (both GPUs).
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make20.log" 2>&1 &
mk=$!
moe() {  # tree gpu shape tokens
  local tree=$1 gpu=$2 shape=$3 tokens=$4 root=$PWD s=$(date +%s); [ "$tree" != new ] && root=$PWD/.ab/$tree
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 10 150 \
    python3 -m quickmoe bench moe --shapes $shape --formats mxfp4 --tokens $tokens --no-baselines \
    > "$OUT/moe_${shape}_$tree.log" 2>&1
  { echo "-- bench moe $shape $tree gpu $gpu: exit $? in $(( $(date +%s) - s )) s"
    grep -E "^$shape " "$OUT/moe_${shape}_$tree.log" | awk '{print $3, $5}' | tr '\n' ' '; echo; } > "$OUT/part_moe_${shape}_$tree.txt"
  cat "$OUT/moe_${shape}_$tree.log" >> "$OUT/moe_${shape}_${tree}_all.log"; rm "$OUT/moe_${shape}_$tree.log"
}
gen() {  # tree gpu prompts
  local tree=$1 gpu=$2 n=$3 root=$PWD s=$(date +%s); [ "$tree" != new ] && root=$PWD/.ab/$tree
  local tag=${n}_$tree
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 10 150 \
    python3 -m quickmoe bench generate /tmp/gpt-oss-20b --num-prompts $n --input-len 1000 --output-len 1000 \
    > "$OUT/gen_$tag.log" 2>&1
  { echo "-- gen $tag gpu $gpu: exit $? in $(( $(date +%s) - s )) s"
    grep -E "^quickmoe |^throughput run: GPU|at batch $n by op family" "$OUT/gen_$tag.log" | cut -c1-200; } > "$OUT/part_gen_$tag.txt"
  cat "$OUT/gen_$tag.log" >> "$OUT/gen_${tag}_all.log"; rm "$OUT/gen_$tag.log"
}
for spec in "gpt-oss-20b 64,128,256,512,768,1024,1536,2048" "gpt-oss-120b 128,256,384,512,768,1024"; do
  set -- $spec
  for round in 1 2; do
    if [ $round = 1 ]; then a=new b=base; else a=base b=new; fi
    moe $a 0 $1 $2 & p=$!; moe $b 1 $1 $2; wait $p
    cat "$OUT/part_moe_$1_$a.txt" "$OUT/part_moe_$1_$b.txt" >> "$OUT/summary.txt"
  done
done
wait $mk; echo "20b checkpoint: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
for round in 1 2; do
  if [ $round = 1 ]; then a=new b=base; else a=base b=new; fi
  gen $a 0 64 & p=$!; gen $b 1 64; wait $p
  cat "$OUT/part_gen_64_$a.txt" "$OUT/part_gen_64_$b.txt" >> "$OUT/summary.txt"
done
left=$(( 560 - ($(date +%s) - t0) ))
( CUDA_VISIBLE_DEVICES=0 PYTHONPATH=src timeout -k 5 $left python3 -m pytest -q -m gpu tests/kernels/test_fused_moe.py \
    -k gpt_oss_20b_shapes > "$OUT/tests0.txt" 2>&1; echo "tests0: exit $? $(tail -1 $OUT/tests0.txt)" >> "$OUT/summary.txt" ) &
p=$!
CUDA_VISIBLE_DEVICES=1 PYTHONPATH=src timeout -k 5 $left python3 -m pytest -q tests/kernels/test_fused_moe_quantized.py \
  -k "shipped_tuned and gpt-oss" > "$OUT/tests1.txt" 2>&1; echo "tests1: exit $? $(tail -1 $OUT/tests1.txt)" >> "$OUT/summary.txt"
wait $p
grep -E "^(FAILED|ERROR)" "$OUT"/tests*.txt | head >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
