#!/usr/bin/env bash
# Session 2026-11-30g call 4 (nvidia-h200-x2): the 120b's H200 files changed at keys 128 and 256; at TP=2 a rank's GEMM 1
# (E128, N = 2 x 1,440, K 2,880) looks up the same file as GEMM 2 at TP=1 (E128_N2880_K2880), so its tiles moved too.
# bench generate -tp 2 in turns, new / base (b69b3c8, .ab/base).
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt"
timeout -k 5 120 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-120b --preset gpt-oss-120b -q > "$OUT/make.log" 2>&1
echo "checkpoint: exit $? at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/summary.txt"
for run in 256 128; do
  for tree in new base new base; do
    [ "$run" = 128 ] && [ $(( $(date +%s) - t0 )) -gt 470 ] && break
    root=$PWD; [ "$tree" = base ] && root=$PWD/.ab/base
    s=$(date +%s)
    QUICKMOE_CACHE_DIR=/tmp/qc-$tree PYTHONPATH=/tmp/site:$root/src timeout -k 10 130 python3 -m quickmoe bench generate \
      /tmp/gpt-oss-120b -tp 2 --num-prompts $run --input-len 1000 --output-len 1000 > "$OUT/gen${run}_tp2_$tree.log" 2>&1
    echo "-- $run $tree: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
    cat "$OUT/gen${run}_tp2_$tree.log" >> "$OUT/gen${run}_tp2_${tree}_all.log"; rm "$OUT/gen${run}_tp2_$tree.log"
    grep -E "^quickmoe |by step kind|at batch (128|256) by op family" "$OUT/gen${run}_tp2_${tree}_all.log" | tail -3 \
      | cut -c1-250 | tee -a "$OUT/summary.txt"
  done
done
