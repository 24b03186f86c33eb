#!/usr/bin/env bash
# Session 2026-11-30i call 2 (nvidia-h200-x2): page-locked staging reused step after step (new) against b4bdb49
# (base, .ab/base). GPU 0: the GPU tests of the staging, the graphs and the engine; then gpt-oss-20b bench generate
# 256 x 1000 -> 1000 in turns new / base / new / base. GPU 1: host_step_probe.py (new) on gpt-oss-20b and
# gpt-oss-120b with the SM clock sampled. Then gpt-oss-120b at TP=2: the probe (new), bench generate new / base.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-120b --preset gpt-oss-120b -q > "$OUT/make120.log" 2>&1 &
mk=$!
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make20.log" 2>&1
probe() {  # name model gpu args...
  local name=$1 model=$2 gpu=$3; shift 3
  local s=$(date +%s)
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$gpu timeout -k 10 240 python3 scripts/probes/host_step_probe.py \
    "$model" "$@" > "$OUT/host_$name.log" 2>&1
  echo "-- host probe $name: exit $? in $(( $(date +%s) - s )) s" >> "$OUT/summary_$name.txt"
  grep -E "^batch|^  (allocator|launch|collect|schedule|under|profiler)|^    |^replay|Error" "$OUT/host_$name.log" \
    | grep -v "\.py:" | head -60 >> "$OUT/summary_$name.txt"
}
gen() {  # tree gpu(s) model extra...
  local tree=$1 gpu=$2 model=$3; shift 3
  local root=$PWD; [ "$tree" != new ] && root=$PWD/.ab/$tree
  local tag=$(basename $model)_$tree s=$(date +%s)
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 10 150 \
    python3 -m quickmoe bench generate $model --num-prompts 256 --input-len 1000 --output-len 1000 "$@" \
    > "$OUT/gen_$tag.log" 2>&1
  echo "-- gen $tag $*: exit $? in $(( $(date +%s) - s )) s" >> "$OUT/summary_gen_$gpu.txt"
  grep -E "^quickmoe |^throughput run|by step kind|at batch 256 by op family" "$OUT/gen_$tag.log" | cut -c1-250 \
    >> "$OUT/summary_gen_$gpu.txt"
  cat "$OUT/gen_$tag.log" >> "$OUT/gen_${tag}_all.log"; rm "$OUT/gen_$tag.log"
}
(
  export CUDA_VISIBLE_DEVICES=0 QUICKMOE_CACHE_DIR=/tmp/qc-t0
  s=$(date +%s)
  QUICKMOE_TEST_DEVICE=cuda timeout -k 5 240 python3 -m pytest -q -rA -p no:cacheprovider -m gpu \
    tests/models/test_pinned_staging.py tests/models/test_cuda_graphs.py > "$OUT/tests.log" 2>&1
  echo "gpu tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/tests.log")" >> "$OUT/summary_gen_0.txt"
  grep -E '^(FAILED|ERROR)' "$OUT/tests.log" | head -20 >> "$OUT/summary_gen_0.txt"
  for tree in new base new base; do gen $tree 0 /tmp/gpt-oss-20b; done
) &
g0=$!
nvidia-smi --query-gpu=index,timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv -lms 200 \
  > "$OUT/clocks.csv" 2>&1 &
smi=$!
(
  probe 20b /tmp/gpt-oss-20b 1 --batch 256,128 --steps 40 --no-cprofile
  while kill -0 $mk 2>/dev/null; do sleep 2; done
  echo "120b checkpoint: $(ls /tmp/gpt-oss-120b/config.json) at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
  probe 120b /tmp/gpt-oss-120b 1 --batch 256 --steps 40
  s=$(date +%s)
  CUDA_VISIBLE_DEVICES=1 QUICKMOE_CACHE_DIR=/tmp/qc-t1 QUICKMOE_TEST_DEVICE=cuda timeout -k 5 200 python3 -m pytest -q \
    -rA -p no:cacheprovider tests/models/test_engine.py > "$OUT/tests_engine.log" 2>&1
  echo "engine tests on cuda: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/tests_engine.log")" >> "$OUT/summary_120b.txt"
  grep -E '^(FAILED|ERROR)' "$OUT/tests_engine.log" | head -20 >> "$OUT/summary_120b.txt"
) &
g1=$!
wait $g0 $g1
kill $smi
cat "$OUT/summary_gen_0.txt" "$OUT/summary_20b.txt" "$OUT/summary_120b.txt" >> "$OUT/summary.txt"
if [ $(( $(date +%s) - t0 )) -lt 330 ]; then
  probe 120b_tp2 /tmp/gpt-oss-120b 0,1 --batch 256 --steps 40 --tp 2 --no-cprofile
  cat "$OUT/summary_120b_tp2.txt" >> "$OUT/summary.txt"
  for tree in new base; do gen $tree 0,1 /tmp/gpt-oss-120b -tp 2; done
  cat "$OUT/summary_gen_0,1.txt" >> "$OUT/summary.txt"
fi
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
