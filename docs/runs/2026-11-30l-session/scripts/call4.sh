#!/usr/bin/env bash
# Session 2026-11-30l call 4 (nvidia-h200-x2): GEMM 1's epilogue storing GEMM 2's gathered operand (no gather
# kernel between the register-operand GEMMs; the work tree) against 624b895 (.ab/base). GPU 0: the register kernels'
# and the 20b fused_moe GPU tests (new); GPU 1: the 20b checkpoint, then bench moe base and new. Then bench
# generate 256 and 64 x 1000 -> 1000, new beside base on the two GPUs, then swapped.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
moe() {  # tree gpu
  local tree=$1 gpu=$2 root=$PWD s=$(date +%s); [ "$tree" != new ] && root=$PWD/.ab/$tree
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 10 150 \
    python3 -m quickmoe bench moe --shapes gpt-oss-20b --formats mxfp4 --tokens 64,128,256,512,1024 --no-baselines \
    > "$OUT/moe_$tree.log" 2>&1
  { echo "-- bench moe $tree gpu $gpu: exit $? in $(( $(date +%s) - s )) s"; grep -E "^ *(64|128|256|512|1024) " "$OUT/moe_$tree.log" | head -12; } >> "$OUT/summary.txt"
  cat "$OUT/moe_$tree.log" >> "$OUT/moe_${tree}_all.log"; rm "$OUT/moe_$tree.log"
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
( CUDA_VISIBLE_DEVICES=0 timeout -k 5 200 python3 -m pytest -q -m gpu tests/kernels/test_moe_gemm_register.py \
    > "$OUT/tests_reg.txt" 2>&1; echo "tests reg: exit $? $(tail -1 $OUT/tests_reg.txt)" >> "$OUT/summary.txt"
  CUDA_VISIBLE_DEVICES=0 timeout -k 5 120 python3 -m pytest -q -m gpu tests/kernels/test_fused_moe.py -k gpt_oss_20b_shapes \
    > "$OUT/tests_fused.txt" 2>&1; echo "tests fused: exit $? $(tail -1 $OUT/tests_fused.txt)" >> "$OUT/summary.txt" ) &
p=$!
CUDA_VISIBLE_DEVICES=1 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make20.log" 2>&1
echo "20b checkpoint: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
moe base 1; moe new 1; moe base 1
wait $p
grep -hE "^(FAILED|ERROR)|Error" "$OUT"/tests*.txt | cut -c1-300 | head >> "$OUT/summary.txt"
for n in 256 64; do
  for round in 1 2; do
    [ $(( $(date +%s) - t0 )) -gt 500 ] && { echo "gen $n round $round: skipped (time)" >> "$OUT/summary.txt"; continue; }
    if [ $round = 1 ]; then a=new b=base; else a=base b=new; fi
    gen $a 0 $n & p=$!; gen $b 1 $n; wait $p
    cat "$OUT/part_gen_${n}_$a.txt" "$OUT/part_gen_${n}_$b.txt" >> "$OUT/summary.txt"
  done
done
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
