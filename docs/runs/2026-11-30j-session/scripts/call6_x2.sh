#!/usr/bin/env bash
# Session 2026-11-30j call 6 (nvidia-h200-x2): gpt-oss-20b, bench generate 512 x 1000 -> 1000 with --max-num-seqs 512
# (GPU 0) beside the default 256 (GPU 1), the work tree: does the step scale past batch 256, and is the host still
# ahead of the device at 512?
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make20.log" 2>&1
gen() {  # gpu max_num_seqs
  local s=$(date +%s)
  CUDA_VISIBLE_DEVICES=$1 QUICKMOE_CACHE_DIR=/tmp/qc-$1 timeout -k 10 300 python3 -m quickmoe bench generate \
    /tmp/gpt-oss-20b --num-prompts 512 --input-len 1000 --output-len 1000 --max-num-seqs $2 > "$OUT/gen_seqs$2.log" 2>&1
  { echo "-- max_num_seqs $2 (gpu $1): exit $? in $(( $(date +%s) - s )) s"
    grep -E "^quickmoe |^throughput run|by step kind|by op family" "$OUT/gen_seqs$2.log" | cut -c1-300; } > "$OUT/part_$2.txt"
}
gen 0 512 & p=$!
gen 1 256
while kill -0 $p 2>/dev/null; do sleep 1; done
cat "$OUT/part_512.txt" "$OUT/part_256.txt" > "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
