#!/usr/bin/env bash
# Session 2026-11-30b call 1 (nvidia-h200): where the MoE layer's time goes per kernel (Qwen3 / Mixtral FP8 at
# prefill sizes, gpt-oss-20b MXFP4 at decode sizes); then a joint split-K x tile sweep of gpt-oss-20b's GEMMs at T = 1.
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 150 python3 scripts/probes/moe_kernel_split_probe.py --shapes qwen3-30b-a3b,mixtral-8x7b --format fp8 \
  --tokens 2048,8192 > "$OUT/split_fp8.log" 2>&1
echo "fp8 split: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
grep -v -i warn "$OUT/split_fp8.log" | tail -8
s=$(date +%s)
timeout -k 5 90 python3 scripts/probes/moe_kernel_split_probe.py --shapes gpt-oss-20b --format mxfp4 \
  --tokens 1,4,16 > "$OUT/split_mxfp4.log" 2>&1
echo "mxfp4 split: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
grep -v -i warn "$OUT/split_mxfp4.log" | tail -6
s=$(date +%s)
timeout -k 5 200 python3 scripts/probes/moe_config_sweep.py --shape gpt-oss-20b --tokens 1 --block-m 8 \
  --block-n 32,64 --warps 2,4 --stages 3,4 --split 1,2,3 --swap 1 --time-tuned --top 8 \
  --json "$OUT/sweep_t1.json" > "$OUT/sweep_t1.log" 2>&1
echo "sweep: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
grep -v -i warn "$OUT/sweep_t1.log" | tail -30
