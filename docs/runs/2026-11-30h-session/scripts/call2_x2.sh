#!/usr/bin/env bash
# Session 2026-11-30h call 2 (nvidia-h200-x2): the register-operand GEMMs with a ragged last gate/up group and a ragged
# last K step (a rank's experts at TP=2). GPU 0: their GPU tests, then tune_moe.py on gpt-oss-120b-tp2 (keys A).
# GPU 1: moe_register_rows_probe.py on gpt-oss-20b at T=128, 256 in turns new / base (5bb70a5: one 128-row weight box
# a step against two of 64 now), then tune_moe.py on gpt-oss-120b-tp2 (keys B).
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
tune() {  # $1: gpu, $2: keys
  mkdir -p "$OUT/configs$1"; cp src/quickmoe/kernels/configs/*.json "$OUT/configs$1/"
  for t in ${2//,/ }; do
    left=$(( 545 - ($(date +%s) - t0) )); [ $left -lt 40 ] && { echo "tune T=$t: skipped (time)" >> "$OUT/tune$1.txt"; continue; }
    s=$(date +%s)
    timeout -k 5 $left python3 scripts/tune_moe.py --shapes gpt-oss-120b-tp2 --tokens $t --out "$OUT/configs$1" \
      >> "$OUT/tune$1.log" 2>&1
    echo "tune T=$t: exit $? in $(( $(date +%s) - s )) s" >> "$OUT/tune$1.txt"
    grep "T=$t:" "$OUT/tune$1.log" | tail -1 >> "$OUT/tune$1.txt"
  done
}
(
  export CUDA_VISIBLE_DEVICES=0 QUICKMOE_CACHE_DIR=/tmp/qc-g0
  s=$(date +%s)
  timeout -k 5 220 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/kernels/test_moe_gemm_register.py \
    > "$OUT/register_tests.log" 2>&1
  echo "register tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/register_tests.log")" >> "$OUT/g0.txt"
  grep -E '^(FAILED|ERROR)' "$OUT/register_tests.log" | head -20 >> "$OUT/g0.txt"
  tune 0 256,128,64,32,16,8
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
  tune 1 1,2,4,1024,4096,8192
) &
g1=$!
wait $g0 $g1
cat "$OUT/g0.txt" "$OUT/g1.txt" "$OUT/tune0.txt" "$OUT/tune1.txt" >> "$OUT/summary.txt"
mkdir -p "$OUT/tp2_files"
for d in 0 1; do for f in "$OUT/configs$d"/E128_N2880_K1440_* "$OUT/configs$d"/E128_N2880_K2880_mxfp4_gate_up_NVIDIA_H200.json; do
  [ -f "$f" ] && cp "$f" "$OUT/tp2_files/gpu${d}_$(basename $f)"; done; done
rm -rf "$OUT/configs0" "$OUT/configs1"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
