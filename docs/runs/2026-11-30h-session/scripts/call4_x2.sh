#!/usr/bin/env bash
# Session 2026-11-30h call 4 (nvidia-h200-x2): bench generate -tp 2 --num-prompts 128 (key 128 of the tuned TP=2
# files), new (850eb94) then base (5bb70a5), as far as the session's device time allows.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout -k 5 120 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-120b --preset gpt-oss-120b -q > "$OUT/make.log" 2>&1
echo "checkpoint: exit $? at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/summary.txt"
for tree in new base; do
  left=$(( 225 - ($(date +%s) - t0) )); [ $left -lt 45 ] && { echo "tp2 $tree: skipped (time)" | tee -a "$OUT/summary.txt"; continue; }
  root=$PWD; [ "$tree" != new ] && root=$PWD/.ab/$tree
  s=$(date +%s)
  QUICKMOE_CACHE_DIR=/tmp/qc-$tree PYTHONPATH=/tmp/site:$root/src timeout -k 5 $left python3 -m quickmoe bench generate \
    /tmp/gpt-oss-120b -tp 2 --num-prompts 128 --input-len 1000 --output-len 1000 > "$OUT/gen128_tp2_$tree.log" 2>&1
  echo "-- tp2 128 $tree: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
  grep -E "^quickmoe |by step kind|at batch 128 by op family" "$OUT/gen128_tp2_$tree.log" | cut -c1-230 | tee -a "$OUT/summary.txt"
done
