#!/usr/bin/env bash
# Session 2026-11-30g call 3 (nvidia-h200-x2, one GPU a process): gpt-oss-120b's H200 MoE entries at keys 128 (the
# 8-row Triton pair) and 256 (the 32-row register-operand pair) against b69b3c8's (.ab/base): bench moe and bench
# generate, new and base at once on the two GPUs, then swapped (each GPU runs each tree once).
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt"
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-120b --preset gpt-oss-120b -q > "$OUT/make.log" 2>&1 &
mk=$!
pair() {  # $1: label, $2: seconds, $3: turn (1: new on GPU 0 and base on GPU 1; 2: swapped), then quickmoe's args
  local label=$1 limit=$2 turn=$3 pids=() gpu tree root; shift 3
  for gpu in 0 1; do
    tree=new; [ $(( gpu + turn )) = 2 ] && tree=base
    root=$PWD; [ "$tree" = base ] && root=$PWD/.ab/base
    CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_CACHE_DIR=/tmp/qc-$tree PYTHONPATH=/tmp/site:$root/src \
      timeout -k 5 "$limit" python3 -m quickmoe "$@" > "$OUT/${label}_${tree}_t${turn}_gpu${gpu}.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
}
s=$(date +%s)
for turn in 1 2; do
  pair moe 150 $turn bench moe --shapes gpt-oss-120b --tokens 64,96,128,192,256,384,512 --no-baselines
done
echo "bench moe: $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
for f in "$OUT"/moe_*.log; do echo "-- $(basename $f)"; grep "gpt-oss-120b " "$f"; done | tee -a "$OUT/summary.txt"
wait $mk; echo "checkpoint: exit $? at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/summary.txt"
for run in 256 128; do
  for turn in 1 2; do
    [ $(( $(date +%s) - t0 )) -gt 420 ] && { echo "gen $run turn $turn: skipped (time)" | tee -a "$OUT/summary.txt"; continue; }
    s=$(date +%s)
    pair gen$run 140 $turn bench generate /tmp/gpt-oss-120b --num-prompts $run --input-len 1000 --output-len 1000
    echo "gen $run turn $turn: $(( $(date +%s) - s )) s (at $(( $(date +%s) - t0 )) s)" | tee -a "$OUT/summary.txt"
  done
  for f in "$OUT"/gen${run}_*.log; do echo "-- $(basename $f)"
    grep -E "^quickmoe |by step kind|at batch (128|256) by op family|at batch 1:" "$f" | cut -c1-260; done \
    | tee -a "$OUT/summary.txt"
done
