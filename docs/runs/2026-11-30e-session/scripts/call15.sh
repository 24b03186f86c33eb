#!/usr/bin/env bash
# Session 2026-11-30e call 15 (nvidia-h200): call 14's A/B again, three turns each (streamed precompile in the working
# tree against .ab/base = 437f905), `serve --warmup auto` on a fresh cache, launch to /health.
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
WARMUP_RUNS="auto:fresh:base:nobench auto:fresh:.:nobench auto:fresh:base:nobench auto:fresh:.:nobench auto:fresh:base:nobench auto:fresh:.:nobench" \
  timeout 300 bash scripts/device/hotpath.sh serve-warmup > "$OUT/hotpath.log" 2>&1
echo "serve-warmup rc $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
grep -E "^-- " "$OUT/serve_warmup.txt" >> "$OUT/summary.txt"
for f in "$OUT"/serve_warmup_*.log; do
  echo "$(basename "$f"): $(grep -h "compiled .* Triton kernels" "$f" | sed 's/.*INFO //' | tail -1) | $(grep -h "^  precompile " "$f" | tail -1)"
done >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
