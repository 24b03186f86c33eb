#!/usr/bin/env bash
# Session 2026-11-29d, call 1: 8-row MoE tiles at decode sizes for the 120b and the families' FP8/NVFP4 experts on the
# H200 (each GEMM alone, beside the committed config with its own tile: --time-tuned); the 20b at T = 128/256 with
# transposed 16/32-row tiles; Qwen3-30B-A3B NVFP4 cold starts, work tree against .ab/base (b59f937: before the
# meta-device rotary table and the shared stacked parts).
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
(python3 -m quickmoe make-checkpoint /tmp/q3nvfp4 --preset qwen3-30b-a3b --weights nvfp4 -q > "$OUT/make.log" 2>&1; echo "made: exit $?" >> "$OUT/make.log") &
sweep() {  # name, then the sweep's arguments
  local name=$1; shift
  timeout 150 python3 scripts/probes/moe_config_sweep.py "$@" --block-k 256 --stages 3 --swap 1 --top 3 --time-tuned \
    --json "$OUT/sweep_$name.json" > "$OUT/sweep_$name.txt" 2>&1
  echo "== sweep $name exit $? ($SECONDS s)"; grep -E "tuned|^ +[0-9]" "$OUT/sweep_$name.txt" | head -90
}
D="--tokens 1,2,4,8,16,32,64 --block-m 8 --block-n 32,64 --warps 2,4"
sweep 120b --shape gpt-oss-120b $D
sweep q3_fp8 --shape qwen3-30b-a3b --format fp8 $D
sweep q3_nvfp4 --shape qwen3-30b-a3b --format nvfp4 $D
sweep mx_fp8 --shape mixtral-8x7b --format fp8 $D
sweep mx_nvfp4 --shape mixtral-8x7b --format nvfp4 $D
[ $SECONDS -lt 380 ] && sweep 20b_128 --shape gpt-oss-20b --tokens 128,256 --block-m 16,32 --block-n 32,64 --warps 2,4
wait; echo "checkpoint made at $SECONDS s: $(tail -1 "$OUT/make.log")"
report() { grep -E "^(imports|config|build|load|process|weights_ready) |import torch alone" "$1"; }
for turn in "new a" "base a" "new b" "base b"; do
  set -- $turn
  [ $SECONDS -gt 470 ] && { echo "stopping: $SECONDS s gone"; break; }
  root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe bench coldstart /tmp/q3nvfp4 -n 3 --device cuda --import-floor \
    --json "$OUT/qwen_$1_$2.json" > "$OUT/qwen_$1_$2.txt" 2>&1
  echo "== Qwen3 NVFP4 $1 turn $2 exit $? ($SECONDS s)"; report "$OUT/qwen_$1_$2.txt"
done
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls
