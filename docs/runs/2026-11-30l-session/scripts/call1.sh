#!/usr/bin/env bash
# Session 2026-11-30l call 1 (nvidia-h200-x2): the register-operand MoE GEMMs with each step's two 64-row halves
# multiplied by wgmma groups of their own, each half decoded while the other half's group runs (the work tree),
# against one group a step waited for before the next decode (624b895, .ab/base). First the register kernels' and
# the 20b fused_moe GPU tests on the new tree (GPU 0) beside base's probe (GPU 1); then the probe (GEMM 1 + GEMM 2
# alone in a graph) new on GPU 0 beside new on GPU 1, then base on GPU 0.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
probe() {  # tree gpu
  local tree=$1 gpu=$2 root=$PWD; [ "$tree" != new ] && root=$PWD/.ab/$tree
  CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 5 150 python3 $root/scripts/probes/moe_register_rows_probe.py \
    --shapes gpt-oss-20b,gpt-oss-120b --tokens-20b 64,128,256,512,1024 --tokens-120b 256,512,1024 --two-steps 32,64 \
    --variants tuned,reg32,reg32k2s2,reg64,reg64k2s2,reg64k2s3 > "$OUT/rows_$tree.txt" 2>&1
  echo "probe $tree gpu $gpu: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/rows_${tree}_all.txt"
  cat "$OUT/rows_$tree.txt" >> "$OUT/rows_${tree}_all.txt"; rm "$OUT/rows_$tree.txt"
}
( CUDA_VISIBLE_DEVICES=0 timeout -k 5 150 python3 -m pytest -q -m gpu tests/kernels/test_moe_gemm_register.py \
    > "$OUT/tests_reg.txt" 2>&1; echo "tests reg: exit $? $(tail -1 $OUT/tests_reg.txt)" >> "$OUT/summary.txt"
  CUDA_VISIBLE_DEVICES=0 timeout -k 5 100 python3 -m pytest -q -m gpu tests/kernels/test_fused_moe.py -k gpt_oss_20b_shapes \
    > "$OUT/tests_fused.txt" 2>&1; echo "tests fused: exit $? $(tail -1 $OUT/tests_fused.txt)" >> "$OUT/summary.txt" ) &
p=$!
probe base 1
wait $p
grep -hE "^(FAILED|ERROR)" "$OUT"/tests*.txt | cut -c1-300 | head >> "$OUT/summary.txt"
probe new 0 & p=$!; probe new 1; wait $p
probe base 0
grep -hE "^probe|^gpt-oss.*T .*:.*=|Error" "$OUT"/rows_*_all.txt | cut -c1-400 >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
