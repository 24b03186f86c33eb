#!/usr/bin/env bash
# Session 2026-11-30i call 1 (nvidia-h200-x2): where a batch-256 decode step's host time goes.
# GPU 1: gpt-oss-20b, host_step_probe.py at batch 256 and 128. GPU 0: gpt-oss-120b (TP=1) the same once its checkpoint
# is made. Then gpt-oss-120b at TP=2, batch 256 (rank 0's view).
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)|MHz" > "$OUT/cpu.txt"
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-120b --preset gpt-oss-120b -q > "$OUT/make120.log" 2>&1 &
mk=$!
probe() {  # name model gpu args...
  local name=$1 model=$2 gpu=$3; shift 3
  local s=$(date +%s)
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$gpu timeout -k 10 240 python3 scripts/probes/host_step_probe.py \
    "$model" "$@" > "$OUT/host_$name.log" 2>&1
  echo "-- host probe $name: exit $? in $(( $(date +%s) - s )) s" >> "$OUT/summary_$name.txt"
  grep -E "^batch|^  (allocator|launch|collect|schedule|under)|^replay|Error" "$OUT/host_$name.log" | head -40 >> "$OUT/summary_$name.txt"
}
(
  python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make20.log" 2>&1
  probe 20b /tmp/gpt-oss-20b 1 --batch 256,128 --steps 40
) &
g1=$!
wait $mk; echo "120b checkpoint: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
probe 120b /tmp/gpt-oss-120b 0 --batch 256,128 --steps 40
wait $g1
cat "$OUT/summary_20b.txt" "$OUT/summary_120b.txt" >> "$OUT/summary.txt"
if [ $(( $(date +%s) - t0 )) -lt 420 ]; then
  probe 120b_tp2 /tmp/gpt-oss-120b 0,1 --batch 256 --steps 40 --tp 2
  cat "$OUT/summary_120b_tp2.txt" >> "$OUT/summary.txt"
fi
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
