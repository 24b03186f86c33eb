#!/usr/bin/env bash
# Session 2026-11-30j call 1 (nvidia-h200-x2): the step's block tables gathered from numpy rows the block manager
# keeps (new, the work tree) against db00a47 (base, .ab/base). GPU tests on GPU 0 beside the probe (new) on GPU 1;
# gpt-oss-20b bench generate 256 x 1000 -> 1000 new beside base, then swapped; gpt-oss-120b TP=2 new/base/new.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-120b --preset gpt-oss-120b -q > "$OUT/make120.log" 2>&1 &
mk=$!
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make20.log" 2>&1
echo "20b checkpoint at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
probe() {  # tree name model gpu args...
  local tree=$1 name=$2 model=$3 gpu=$4; shift 4
  local root=$PWD; [ "$tree" != new ] && root=$PWD/.ab/$tree
  local s=$(date +%s)
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-${gpu/,/} PYTHONPATH=/tmp/site:$root/src timeout -k 10 200 \
    python3 $root/scripts/probes/host_step_probe.py "$model" "$@" > "$OUT/host_${name}_$tree.log" 2>&1
  { echo "-- host probe $name $tree: exit $? in $(( $(date +%s) - s )) s"
    grep -E "^batch|^  (allocator|launch|collect|schedule|under|profiler)|^    |^replay|Error" "$OUT/host_${name}_$tree.log" \
    | grep -v "\.py:" | head -40; } > "$OUT/part_host_${name}_$tree.txt"
}
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
(
  export CUDA_VISIBLE_DEVICES=0 QUICKMOE_CACHE_DIR=/tmp/qc-t0
  s=$(date +%s)
  QUICKMOE_TEST_DEVICE=cuda timeout -k 5 200 python3 -m pytest -q -rA -p no:cacheprovider \
    tests/models/test_pinned_staging.py tests/models/test_cuda_graphs.py tests/models/test_engine.py \
    tests/unit/test_block_manager.py > "$OUT/tests.log" 2>&1
  echo "tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/tests.log")" > "$OUT/part_tests.txt"
  grep -E '^(FAILED|ERROR)' "$OUT/tests.log" | head -20 >> "$OUT/part_tests.txt"
) &
tp=$!
probe new 20b /tmp/gpt-oss-20b 1 --batch 256 --steps 40 --no-cprofile
while kill -0 $tp 2>/dev/null; do sleep 1; done
cat "$OUT/part_tests.txt" "$OUT/part_host_20b_new.txt" >> "$OUT/summary.txt"
for round in 1 2; do
  if [ $round = 1 ]; then a=new b=base; else a=base b=new; fi
  gen $a 0 /tmp/gpt-oss-20b & p=$!
  gen $b 1 /tmp/gpt-oss-20b; wait $p
  cat "$OUT/part_gpt-oss-20b_$a.txt" "$OUT/part_gpt-oss-20b_$b.txt" >> "$OUT/summary.txt"
done
wait $mk; echo "120b checkpoint: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
for tree in new base new; do
  [ $(( $(date +%s) - t0 )) -gt 470 ] && { echo "tp2 $tree: skipped (time)" >> "$OUT/summary.txt"; continue; }
  gen $tree 0,1 /tmp/gpt-oss-120b -tp 2
  cat "$OUT/part_gpt-oss-120b_${tree}_tp2.txt" >> "$OUT/summary.txt"
done
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
