#!/usr/bin/env bash
# Session 2026-11-30h call 3 (nvidia-h200-x2). GPU 0: the register-operand GPU tests (one 128-row box again; RAGGED).
# GPU 1: moe_register_rows_probe.py, gpt-oss-20b T=128,256 new / base (the one-box fix), then gpt-oss-120b-tp2 T=256,512
# (the tuned TP=2 entries against the register tiles). Meanwhile the 120b checkpoint. Then bench generate -tp 2
# --num-prompts 256 in turns: new (5fadaaa: tuned TP=2 files) / reg (new, key 256 = the 32-row register pair) / base.
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
    > "$OUT/register_tests.log" 2>&1
  echo "register tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/register_tests.log")" >> "$OUT/g0.txt"
  grep -E '^(FAILED|ERROR)' "$OUT/register_tests.log" | head -20 >> "$OUT/g0.txt"
) &
g0=$!
(
  export CUDA_VISIBLE_DEVICES=1 QUICKMOE_CACHE_DIR=/tmp/qc-g1
  for tree in new base new base; do
    root=$PWD; [ "$tree" != new ] && root=$PWD/.ab/$tree
    s=$(date +%s)
    PYTHONPATH=/tmp/site:$root/src timeout -k 5 60 python3 $root/scripts/probes/moe_register_rows_probe.py \
      --shapes gpt-oss-20b --tokens-20b 128,256 --stages 3 > "$OUT/rows_$tree.log" 2>&1
    echo "-- rows probe $tree: exit $? in $(( $(date +%s) - s )) s" >> "$OUT/g1.txt"
    sed -n '/^GEMM 1 + GEMM 2/,$p' "$OUT/rows_$tree.log" | cut -c1-200 >> "$OUT/g1.txt"
    cat "$OUT/rows_$tree.log" >> "$OUT/rows_${tree}_all.log"; rm "$OUT/rows_$tree.log"
  done
  s=$(date +%s)
  timeout -k 5 90 python3 scripts/probes/moe_register_rows_probe.py --shapes gpt-oss-120b-tp2 --tokens-20b 128,256,512 \
    --stages 3 > "$OUT/rows_tp2.log" 2>&1
  echo "-- rows probe 120b-tp2: exit $? in $(( $(date +%s) - s )) s" >> "$OUT/g1.txt"
  sed -n '/^GEMM 1 + GEMM 2/,$p' "$OUT/rows_tp2.log" | cut -c1-260 >> "$OUT/g1.txt"
  grep -E "Error" "$OUT/rows_tp2.log" | head -5 >> "$OUT/g1.txt"
) &
g1=$!
wait $g0 $g1
cat "$OUT/g0.txt" "$OUT/g1.txt" >> "$OUT/summary.txt"
wait $mk; echo "checkpoint: exit $? at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/summary.txt"
for tree in new reg base new reg base; do
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
