#!/usr/bin/env bash
# Session 2026-11-30m call 3 (nvidia-h200-x2): the work tree (a stage's weights as one box of 64 bytes a row at 64-row
# tiles only, a box a step at smaller tiles; GEMM 2 capped at 128 registers at 64-row tiles; a config's maxnreg
# reaching the register kernels), .ab/cap (the same with the H200 20b files' keys 64 and 128 capped at 128 registers)
# and 3aa5711 (.ab/base). GPU 0: the register kernels' and the 20b fused_moe GPU tests (new). GPU 1: the checkpoint,
# the probe (new with 128-register twins; base), bench moe 20b and 120b. Then bench generate 64 x 1000 -> 1000
# (new|base, cap|new, base|cap) and 256 (new|base, base|new).
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
probe() {  # tree gpu variants [extra]
  local tree=$1 gpu=$2 variants=$3 extra=${4:-} root=$PWD; [ "$tree" != new ] && root=$PWD/.ab/$tree
  CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 5 150 python3 $root/scripts/probes/moe_register_rows_probe.py \
    --shapes gpt-oss-20b,gpt-oss-120b --tokens-20b 64,128,256,512 --tokens-120b 256,512 --two-steps 32,64 $extra \
    --variants $variants > "$OUT/rows_$tree.txt" 2>&1
  echo "probe $tree gpu $gpu: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/rows_${tree}_all.txt"
  cat "$OUT/rows_$tree.txt" >> "$OUT/rows_${tree}_all.txt"; rm "$OUT/rows_$tree.txt"
}
moe() {  # tree gpu shape tokens
  local tree=$1 gpu=$2 shape=$3 tokens=$4 root=$PWD s=$(date +%s); [ "$tree" != new ] && root=$PWD/.ab/$tree
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 10 150 \
    python3 -m quickmoe bench moe --shapes $shape --formats mxfp4 --tokens $tokens --no-baselines \
    > "$OUT/moe_${shape}_$tree.log" 2>&1
  echo "-- bench moe $shape $tree gpu $gpu: exit $? in $(( $(date +%s) - s )) s: $(grep -E "^gpt-oss.*mxfp4 +[0-9]" "$OUT/moe_${shape}_$tree.log" | awk '{print $3, $5}' | paste -sd' ')" >> "$OUT/moe_summary.txt"
  cat "$OUT/moe_${shape}_$tree.log" >> "$OUT/moe_${shape}_${tree}_all.log"; rm "$OUT/moe_${shape}_$tree.log"
}
gen() {  # tree gpu prompts
  local tree=$1 gpu=$2 n=$3 root=$PWD s=$(date +%s); [ "$tree" != new ] && root=$PWD/.ab/$tree
  local tag=${n}_$tree
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 10 150 \
    python3 -m quickmoe bench generate /tmp/gpt-oss-20b --num-prompts $n --input-len 1000 --output-len 1000 \
    > "$OUT/gen_$tag.log" 2>&1
  { echo "-- gen $tag gpu $gpu: exit $? in $(( $(date +%s) - s )) s"
    grep -E "^quickmoe |^throughput run by|by op family" "$OUT/gen_$tag.log" | grep -v "batch 1 " | cut -c1-250; } > "$OUT/part_gen_$tag.txt"
  cat "$OUT/gen_$tag.log" >> "$OUT/gen_${tag}_all.log"; rm "$OUT/gen_$tag.log"
}
( CUDA_VISIBLE_DEVICES=0 timeout -k 5 240 python3 -m pytest -q -m gpu tests/kernels/test_moe_gemm_register.py \
    > "$OUT/tests_reg.txt" 2>&1; echo "tests reg: exit $? $(tail -1 $OUT/tests_reg.txt)" >> "$OUT/summary.txt"
  CUDA_VISIBLE_DEVICES=0 timeout -k 5 120 python3 -m pytest -q -m gpu tests/kernels/test_fused_moe.py -k gpt_oss_20b_shapes \
    > "$OUT/tests_fused.txt" 2>&1; echo "tests fused: exit $? $(tail -1 $OUT/tests_fused.txt)" >> "$OUT/summary.txt" ) &
p=$!
CUDA_VISIBLE_DEVICES=1 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make20.log" 2>&1
echo "20b checkpoint: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
probe new 1 tuned,reg32k2s2,reg32k2s2r128,reg64k2s2 "--maxnreg 128"
probe base 1 tuned
moe new 1 gpt-oss-20b 64,128,256,512,1024; moe base 1 gpt-oss-20b 64,128,256,512,1024
wait $p
grep -hE "^(FAILED|ERROR)" "$OUT"/tests_*.txt | cut -c1-300 | head >> "$OUT/summary.txt"
moe base 0 gpt-oss-20b 64,128,256,512,1024 & p=$!; moe new 1 gpt-oss-20b 64,128,256,512,1024; wait $p
moe new 0 gpt-oss-120b 128,256,512,1024 & p=$!; moe base 1 gpt-oss-120b 128,256,512,1024; wait $p
grep -hE "^probe|^gpt-oss.*T .*:.*=|Error" "$OUT"/rows_*_all.txt | cut -c1-300 >> "$OUT/summary.txt"
cat "$OUT/moe_summary.txt" >> "$OUT/summary.txt"
for pair in "64 new base" "64 cap new" "64 base cap" "256 new base" "256 base new"; do
  set -- $pair
  [ $(( $(date +%s) - t0 )) -gt 520 ] && { echo "gen $pair: skipped (time)" >> "$OUT/summary.txt"; continue; }
  gen $2 0 $1 & p=$!; gen $3 1 $1; wait $p
  cat "$OUT/part_gen_$1_$2.txt" "$OUT/part_gen_$1_$3.txt" >> "$OUT/summary.txt"
done
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
