#!/usr/bin/env bash
# Session 2026-11-30l call 6 (nvidia-h200-x2): the final tree's TP = 2 GPU tests (a rank's ragged experts now go
# through GEMM 1's gathered output in the engine), then bench moe gpt-oss-120b at T = 128-1,024, new (GPU 0) beside
# base (624b895, GPU 1), then swapped.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
timeout -k 5 200 python3 -m pytest -q -m gpu tests/distributed/test_two_gpus.py > "$OUT/tests_tp2.txt" 2>&1
echo "tests tp2: exit $? $(tail -1 $OUT/tests_tp2.txt) at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
grep -hE "^(FAILED|ERROR)" "$OUT/tests_tp2.txt" | cut -c1-300 | head >> "$OUT/summary.txt"
moe() {  # tree gpu
  local tree=$1 gpu=$2 root=$PWD s=$(date +%s); [ "$tree" != new ] && root=$PWD/.ab/$tree
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 10 120 \
    python3 -m quickmoe bench moe --shapes gpt-oss-120b --formats mxfp4 --tokens 128,256,512,1024 --no-baselines \
    > "$OUT/moe120_${tree}_$gpu.log" 2>&1
  echo "-- bench moe 120b $tree gpu $gpu: exit $? in $(( $(date +%s) - s )) s $(grep -E '^gpt-oss-120b +mxfp4' $OUT/moe120_${tree}_$gpu.log | awk '{print $3, $5}' | paste -sd' ')" >> "$OUT/summary.txt"
}
moe new 0 & p=$!; moe base 1; wait $p
moe base 0 & p=$!; moe new 1; wait $p
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
