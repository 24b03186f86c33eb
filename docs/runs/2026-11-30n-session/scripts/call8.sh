#!/usr/bin/env bash
# Session 2026-11-30n call 8 (nvidia-h200): gpt-oss-120b's MoE layer at decode batches, the work tree against d771c76
# (.ab/base), in turns new / base / new / base: call 7's profiled batch-256 steps read 25.3-25.4 ms of MoE kernels
# (new) against 24.4-24.6 (base) while the runs' step medians were 2% shorter in the new tree.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
moe() {  # tree
  local tree=$1 root=$PWD s=$(date +%s); [ "$tree" != new ] && root=$PWD/.ab/$tree
  QUICKMOE_CACHE_DIR=/tmp/qc-$tree PYTHONPATH=/tmp/site:$root/src timeout -k 10 150 \
    python3 -m quickmoe bench moe --shapes gpt-oss-120b --formats mxfp4 --tokens 64,128,192,256,384,512 \
    --no-baselines > "$OUT/moe_$tree.log" 2>&1
  echo "-- bench moe $tree: exit $? in $(( $(date +%s) - s )) s: $(grep -E "^gpt-oss.*mxfp4 +[0-9]" "$OUT/moe_$tree.log" | awk '{print $3, $5}' | paste -sd' ')" >> "$OUT/summary.txt"
  cat "$OUT/moe_$tree.log" >> "$OUT/moe_${tree}_all.log"; rm "$OUT/moe_$tree.log"
}
moe new; moe base; moe new; moe base
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
