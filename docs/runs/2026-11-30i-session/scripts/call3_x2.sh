#!/usr/bin/env bash
# Session 2026-11-30i call 3 (nvidia-h200-x2): page-locked staging (new, the work tree) against b4bdb49 (base,
# .ab/base), bench generate 256 x 1000 -> 1000. gpt-oss-20b: new on GPU 0 beside base on GPU 1, then swapped.
# gpt-oss-120b TP=1: the same, one round. gpt-oss-120b TP=2: new / base / new / base.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-120b --preset gpt-oss-120b -q > "$OUT/make120.log" 2>&1 &
mk=$!
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make20.log" 2>&1
gen() {  # tree gpu(s) model extra...
  local tree=$1 gpu=$2 model=$3; shift 3
  local root=$PWD; [ "$tree" != new ] && root=$PWD/.ab/$tree
  local tag=$(basename $model)_$tree s=$(date +%s)
  [ $# -gt 0 ] && tag=${tag}_tp2
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-${gpu/,/} PYTHONPATH=/tmp/site:$root/src timeout -k 10 150 \
    python3 -m quickmoe bench generate $model --num-prompts 256 --input-len 1000 --output-len 1000 "$@" \
    > "$OUT/gen_$tag.log" 2>&1
  { echo "-- gen $tag gpu $gpu: exit $? in $(( $(date +%s) - s )) s"
    grep -E "^quickmoe |^throughput run|by step kind|at batch 256 by op family|^decode at batch 1: median" "$OUT/gen_$tag.log" \
      | cut -c1-250; } > "$OUT/part_$tag.txt"
  cat "$OUT/gen_$tag.log" >> "$OUT/gen_${tag}_all.log"; rm "$OUT/gen_$tag.log"
}
for round in 1 2; do
  if [ $round = 1 ]; then a=new b=base; else a=base b=new; fi
  gen $a 0 /tmp/gpt-oss-20b & p=$!
  gen $b 1 /tmp/gpt-oss-20b; wait $p
  cat "$OUT/part_gpt-oss-20b_$a.txt" "$OUT/part_gpt-oss-20b_$b.txt" >> "$OUT/summary.txt"
done
wait $mk; echo "120b checkpoint: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
gen new 0 /tmp/gpt-oss-120b & p=$!
gen base 1 /tmp/gpt-oss-120b; wait $p
cat "$OUT/part_gpt-oss-120b_new.txt" "$OUT/part_gpt-oss-120b_base.txt" >> "$OUT/summary.txt"
for tree in new base new base; do
  [ $(( $(date +%s) - t0 )) -gt 500 ] && { echo "tp2 $tree: skipped (time)" >> "$OUT/summary.txt"; continue; }
  gen $tree 0,1 /tmp/gpt-oss-120b -tp 2
  cat "$OUT/part_gpt-oss-120b_${tree}_tp2.txt" >> "$OUT/summary.txt"
done
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
