#!/usr/bin/env bash
# Session 2026-11-30l call 8 (nvidia-h200-x2): GEMM 2's epilogue storing 16 bytes a thread through shared memory (the
# work tree) against 82d887d (.ab/head). GPU 0: the register kernels' GEMM 2 and gathered-operand GPU tests, then the
# 20b fused_moe tests (new); GPU 1: bench moe gpt-oss-20b T = 64-1,024, head / new / head / new.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
moe() {  # tree gpu
  local tree=$1 gpu=$2 root=$PWD s=$(date +%s); [ "$tree" != new ] && root=$PWD/.ab/$tree
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree-$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 10 100 \
    python3 -m quickmoe bench moe --shapes gpt-oss-20b --formats mxfp4 --tokens 64,128,256,512,1024 --no-baselines \
    > "$OUT/moe_${tree}.log" 2>&1
  echo "-- bench moe $tree gpu $gpu: exit $? in $(( $(date +%s) - s )) s $(grep -E '^gpt-oss-20b +mxfp4' $OUT/moe_${tree}.log | awk '{print $3, $5}' | paste -sd' ')" >> "$OUT/summary.txt"
  cat "$OUT/moe_${tree}.log" >> "$OUT/moe_${tree}_all.log"; rm "$OUT/moe_${tree}.log"
}
( CUDA_VISIBLE_DEVICES=0 timeout -k 5 150 python3 -m pytest -q -m gpu tests/kernels/test_moe_gemm_register.py \
    -k "gemm2 or gathered or tensor_parallel" > "$OUT/tests_reg.txt" 2>&1
  echo "tests reg: exit $? $(tail -1 $OUT/tests_reg.txt)" >> "$OUT/summary.txt" ) &
p=$!
moe head 1; moe new 1; moe head 1; moe new 1
wait $p
grep -hE "^(FAILED|ERROR)" "$OUT"/tests*.txt | cut -c1-300 | head >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
