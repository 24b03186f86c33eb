#!/usr/bin/env bash
# Session 2026-11-30m call 1 (nvidia-h200-x2): the register-operand MoE GEMMs taking a pipeline stage's packed weights
# as one box of 32 x steps_per_stage bytes a row (64 at two steps, 128 at four; 16-byte chunks swizzled with the row)
# instead of one box of 32 bytes a row per step (the work tree), against 3aa5711 (.ab/base). GPU 0: the register
# kernels' GPU tests (new), then the float32-reference tests on a planted tree (the word view's swizzle dropped:
# must fail); then the probe. GPU 1: the probe (GEMM 1 + GEMM 2 alone in a graph) base, new, base, new.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
probe() {  # tree gpu
  local tree=$1 gpu=$2 root=$PWD variants="tuned,reg32k2s2,reg64k2s2" extra=""; [ "$tree" != new ] && root=$PWD/.ab/$tree
  [ "$tree" = new ] && { variants="$variants,reg32k4s2,reg32k4s3,reg64k4s2"; extra="--four-steps 32,64"; }
  CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 5 170 python3 $root/scripts/probes/moe_register_rows_probe.py \
    --shapes gpt-oss-20b,gpt-oss-120b --tokens-20b 64,128,256,512,1024 --tokens-120b 128,256,512 --two-steps 32,64 \
    $extra --variants $variants > "$OUT/rows_$tree.txt" 2>&1
  echo "probe $tree gpu $gpu: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/rows_${tree}_all.txt"
  cat "$OUT/rows_$tree.txt" >> "$OUT/rows_${tree}_all.txt"; rm "$OUT/rows_$tree.txt"
}
( CUDA_VISIBLE_DEVICES=0 timeout -k 5 240 python3 -m pytest -q -m gpu tests/kernels/test_moe_gemm_register.py \
    > "$OUT/tests_reg.txt" 2>&1; echo "tests reg: exit $? $(tail -1 $OUT/tests_reg.txt)" >> "$OUT/summary.txt"
  CUDA_VISIBLE_DEVICES=0 PYTHONPATH=/tmp/site:$PWD/.ab/plant/src timeout -k 5 120 python3 -m pytest -q -m gpu \
    .ab/plant/tests/kernels/test_moe_gemm_register.py -k "float32_reference or tensor_parallel" -p no:cacheprovider \
    > "$OUT/tests_planted.txt" 2>&1
  echo "tests planted (must fail): exit $? $(tail -1 $OUT/tests_planted.txt)" >> "$OUT/summary.txt" ) &
p=$!
probe base 1; probe new 1
wait $p
grep -hE "^(FAILED|ERROR)" "$OUT"/tests_reg.txt | cut -c1-300 | head >> "$OUT/summary.txt"
grep -hE "^FAILED" "$OUT"/tests_planted.txt | cut -c1-200 | head -20 >> "$OUT/summary.txt"
probe new 0 & p=$!; probe base 1; wait $p
grep -hE "^probe|^gpt-oss.*T .*:.*=|Error" "$OUT"/rows_*_all.txt | cut -c1-400 >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
