#!/usr/bin/env bash
# Session 2026-11-28c, call 3: gpt-oss-20b's prefill MoE tiles transposed (swap_ab) at T = 1,024 and 8,192:
# GPU tests, bench moe in turns, bench generate in turns (work tree "new" vs .ab/base = HEAD).
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 240 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_fused_moe.py > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests: $(tail -1 "$OUT/gpu_tests.log")"; grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests.log" | head
first=1
for run in new base new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  baselines=--no-baselines; [ $first = 1 ] && baselines=; first=0
  { echo "-- $run"; PYTHONPATH=/tmp/site:$root/src timeout 120 python3 -m quickmoe bench moe --shapes gpt-oss-20b \
      --tokens 1024,2048,4096,8192 $baselines 2>&1 | grep -v INFO; } | tee -a "$OUT/ab_bench_moe.txt"
done
CKPT=/tmp/gpt-oss-20b
[ -f $CKPT/config.json ] || python3 -m quickmoe make-checkpoint $CKPT --preset gpt-oss-20b -q
for run in new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src timeout 150 python3 -m quickmoe bench generate $CKPT --num-prompts 32 --input-len 8000 \
    --output-len 2 > "$OUT/gen_prefill_$run.log" 2>&1
  PYTHONPATH=/tmp/site:$root/src timeout 150 python3 -m quickmoe bench generate $CKPT --num-prompts 256 --input-len 1000 \
    --output-len 1000 > "$OUT/gen_$run.log" 2>&1
  { echo "-- $run"; grep -E "^quickmoe |by step kind|by op family|prefill" "$OUT/gen_prefill_$run.log" | head -8
    grep -E "^quickmoe |decode at batch 1: median|by step kind|by op family" "$OUT/gen_$run.log"; } | tee -a "$OUT/ab_generate.txt"
done
echo "== done $(date +%T)"
