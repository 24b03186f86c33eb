#!/usr/bin/env bash
# Session 2026-11-30l call 2 (nvidia-h200-x2): where the register-operand MoE GEMMs' time goes, by ablation
# (624b895 + /tmp/ablation.diff in .ab/abl, QUICKMOE_ABLATE): "" the shipped kernels; nodecode: the packed words'
# bits as wgmma's operand (no decode, no scale loads); n8: the full decode, wgmma on 8 token rows only (the tensor
# cores' work / TOK / 8); both. GEMM 1 + GEMM 2 alone in a graph (the rows probe, the files' tuned entries),
# gpt-oss-20b T = 64, 256, 512 and gpt-oss-120b T = 256. Outputs of the ablations are wrong by construction.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
probe() {  # ablation gpu
  local ab=$1 gpu=$2 root=$PWD/.ab/abl tag=${1:-shipped}
  CUDA_VISIBLE_DEVICES=$gpu QUICKMOE_ABLATE=$ab PYTHONPATH=/tmp/site:$root/src timeout -k 5 120 \
    python3 $root/scripts/probes/moe_register_rows_probe.py --shapes gpt-oss-20b,gpt-oss-120b --tokens-20b 64,256,512 \
    --tokens-120b 256 --two-steps 64 --variants tuned,reg64k2s2 > "$OUT/rows_${tag}_$gpu.txt" 2>&1
  echo "probe $tag gpu $gpu: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
  grep -hE "^gpt-oss.*T .*:.*=|Error" "$OUT/rows_${tag}_$gpu.txt" | cut -c1-300 >> "$OUT/summary.txt"
}
probe "" 0 & p=$!; probe n8 1; wait $p
probe nodecode 0 & p=$!; probe both 1; wait $p
probe n8 0 & p=$!; probe "" 1; wait $p
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
