#!/usr/bin/env bash
# Session 2026-11-30h call 1 (nvidia-h200-x2). GPU 0: the register-operand GEMMs' GPU tests (the overlapped K loop's
# bits), then moe_register_rows_probe.py with the overlapped loop at 32 and 64 rows (hotpath.sh register-overlap).
# GPU 1: gluon_fp8_probe.py, the warp-specialized persistent FP8 GEMM beside the Triton kernel (families.sh gluon-fp8).
# Meanwhile the 120b checkpoint; then bench generate -tp 2 --num-prompts 256 in turns, HEAD (new) / b69b3c8 (.ab/b69).
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-120b --preset gpt-oss-120b -q > "$OUT/make.log" 2>&1 &
mk=$!
(
  export CUDA_VISIBLE_DEVICES=0 QUICKMOE_CACHE_DIR=/tmp/qc-g0
  s=$(date +%s)
  timeout -k 5 200 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/kernels/test_moe_gemm_register.py \
    > "$OUT/register_overlap_tests.log" 2>&1
  echo "register tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/register_overlap_tests.log")" >> "$OUT/g0.txt"
  grep -E '^(FAILED|ERROR)' "$OUT/register_overlap_tests.log" | head -20 >> "$OUT/g0.txt"
  s=$(date +%s)
  timeout -k 5 300 python3 scripts/probes/moe_register_rows_probe.py --tokens-20b 64,128,256,512 \
    --tokens-120b 256,512 --overlap 32,64 --stages 3,4 --json "$OUT/register_overlap.json" \
    > "$OUT/register_overlap.log" 2>&1
  echo "overlap probe: exit $? in $(( $(date +%s) - s )) s" >> "$OUT/g0.txt"
  sed -n '/^GEMM 1 + GEMM 2/,$p' "$OUT/register_overlap.log" >> "$OUT/g0.txt"
  grep -E "Error|error:" "$OUT/register_overlap.log" | head -10 >> "$OUT/g0.txt"
) &
g0=$!
(
  export CUDA_VISIBLE_DEVICES=1 QUICKMOE_CACHE_DIR=/tmp/qc-g1
  s=$(date +%s)
  timeout -k 5 300 python3 scripts/probes/gluon_fp8_probe.py --json "$OUT/gluon_fp8.json" > "$OUT/gluon_fp8.log" 2>&1
  echo "gluon fp8 probe: exit $? in $(( $(date +%s) - s )) s" >> "$OUT/g1.txt"
  grep -E "TFLOP|Error|error" "$OUT/gluon_fp8.log" | cut -c1-300 >> "$OUT/g1.txt"
) &
g1=$!
wait $g0 $g1
cat "$OUT/g0.txt" "$OUT/g1.txt" >> "$OUT/summary.txt"
wait $mk; echo "checkpoint: exit $? at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/summary.txt"
for tree in new b69 new b69; do
  [ $(( $(date +%s) - t0 )) -gt 480 ] && { echo "tp2 $tree: skipped (time)" | tee -a "$OUT/summary.txt"; continue; }
  root=$PWD; [ "$tree" != new ] && root=$PWD/.ab/$tree
  s=$(date +%s)
  QUICKMOE_CACHE_DIR=/tmp/qc-$tree PYTHONPATH=/tmp/site:$root/src timeout -k 10 110 python3 -m quickmoe bench generate \
    /tmp/gpt-oss-120b -tp 2 --num-prompts 256 --input-len 1000 --output-len 1000 > "$OUT/gen_tp2_$tree.log" 2>&1
  echo "-- tp2 256 $tree: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
  cat "$OUT/gen_tp2_$tree.log" >> "$OUT/gen_tp2_${tree}_all.log"; rm "$OUT/gen_tp2_$tree.log"
  grep -E "^quickmoe |by step kind|at batch 256 by op family" "$OUT/gen_tp2_${tree}_all.log" | tail -3 \
    | cut -c1-230 | tee -a "$OUT/summary.txt"
done
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
