#!/usr/bin/env bash
# Session 2026-11-30f call 4 (nvidia-h200): the register-operand GEMM 1 end to end: a fresh-cache serve start (the
# precompile's workers compile the Gluon kernel; nothing compiles after /health), then bench generate 256 x 1000 ->
# 1000 in turns against 939832e (.ab/base).
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
s=$(date +%s)
WARMUP_RUNS="auto:fresh:.:nobench" timeout -k 5 200 bash scripts/device/hotpath.sh serve-warmup > "$OUT/serve_warmup.log" 2>&1
echo "serve-warmup: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
grep -A3 "^-- auto" "$OUT/serve_warmup.log" | tee -a "$OUT/summary.txt"
grep -h "could not be compiled\|compiled [0-9]* Triton kernels" "$OUT"/serve_warmup_*.log 2>/dev/null | tee -a "$OUT/summary.txt"
for run in new base new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  s=$(date +%s)
  PYTHONPATH=/tmp/site:$root/src timeout -k 5 150 python3 -m quickmoe bench generate /tmp/gpt-oss-20b --num-prompts 256 \
    --input-len 1000 --output-len 1000 > "$OUT/gen_$run.log" 2>&1
  { echo "-- $run: exit $? in $(( $(date +%s) - s )) s"
    grep -E "^quickmoe |decode at batch 1: median|by step kind|by op family" "$OUT/gen_$run.log"; } | tee -a "$OUT/summary.txt"
  cat "$OUT/gen_$run.log" >> "$OUT/gen_all.log"; rm "$OUT/gen_$run.log"
done
