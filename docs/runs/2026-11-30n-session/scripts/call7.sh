#!/usr/bin/env bash
# Session 2026-11-30n call 7 (nvidia-h200): gpt-oss-120b bench generate 256 x 1000 -> 1000 on the work tree against
# d771c76 (.ab/base: the seventh session's 120b H200 files, measured then at 6,732-6,755 output tok/s on another
# machine), in turns new / base / new / base, to see whether call 6's 6,541.7 is this machine or the tree.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
CKPT=/dev/shm/gpt-oss-120b
[ -f "$CKPT/config.json" ] || timeout -k 10 240 python3 -m quickmoe make-checkpoint "$CKPT" --preset gpt-oss-120b -q
echo "checkpoint ready at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
gen() {  # tree
  local tree=$1 root=$PWD s=$(date +%s); [ "$tree" != new ] && root=$PWD/.ab/$tree
  QUICKMOE_CACHE_DIR=/tmp/qc-$tree PYTHONPATH=/tmp/site:$root/src timeout -k 10 150 \
    python3 -m quickmoe bench generate "$CKPT" --num-prompts 256 --input-len 1000 --output-len 1000 \
    > "$OUT/gen_$tree.log" 2>&1
  echo "-- generate $tree: exit $? in $(( $(date +%s) - s )) s: $(grep -E '^quickmoe ' "$OUT/gen_$tree.log" | awk '{print $4}') tok/s; $(grep -oE 'GPU [0-9.]+ ms per step \(median of [0-9]+ steps, median batch [0-9]+' "$OUT/gen_$tree.log" | head -1); $(grep -oE 'decode step at batch 256 by op family.*moe [0-9.]+ ms' "$OUT/gen_$tree.log" | grep -oE 'moe [0-9.]+ ms')" >> "$OUT/summary.txt"
  cat "$OUT/gen_$tree.log" >> "$OUT/gen_${tree}_all.log"; rm "$OUT/gen_$tree.log"
}
gen new; gen base; gen new; gen base
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
