#!/usr/bin/env bash
# Session 2026-11-30o call 7 (nvidia-h200, 16 CPUs): where this host's warm-page-cache load loses bandwidth
# (scripts/probes/h2d_pipeline_probe.py: host memcpy alone and beside H2D, the reader -> ring -> copy pipeline).
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
[ -f /tmp/gpt-oss-20b/config.json ] || timeout -k 10 150 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b \
  --preset gpt-oss-20b -q > "$OUT/make.log" 2>&1
cat /tmp/gpt-oss-20b/*.safetensors > /dev/null
timeout -k 10 300 python3 scripts/probes/h2d_pipeline_probe.py /tmp/gpt-oss-20b > "$OUT/h2d_pipeline.txt" 2>&1
echo "probe: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/h2d_pipeline.txt" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
