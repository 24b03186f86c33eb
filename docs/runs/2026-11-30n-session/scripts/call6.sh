#!/usr/bin/env bash
# Session 2026-11-30n call 6 (nvidia-h200): gpt-oss-120b end to end on one H200 with the tree's files (the 120b's key
# 128 8-row pair, key 256 32-row register pair, key 1,024 64-row register pair and key 1,536 since the seventh session
# of 2026-11-30): bench generate 256 x 1000 -> 1000, quickmoe serve + bench serve at concurrency 1 and 64, bench
# coldstart -n 2. The checkpoint (65 GB) in /dev/shm: the disk holds 64 GB.
set -uo pipefail
t0=$(date +%s)
export CKPT=/dev/shm/gpt-oss-120b TP=1
timeout -k 10 560 bash scripts/device/tp.sh generate1 serve1 coldstart1 > /tmp/tp_stdout.txt 2>&1
echo "tp.sh: exit $? in $(( $(date +%s) - t0 )) s" > /tmp/summary.txt
OUT=${OUT:-/tmp/quickmoe-out}
cp /tmp/tp_stdout.txt "$OUT/tp_stdout.txt"
cat /tmp/summary.txt "$OUT/timeline.txt" > "$OUT/summary.txt" 2>/dev/null
grep -hE "output tok/s|ITL|TTFT|Successful|Failed|requests" "$OUT"/bench_serve_*.log 2>/dev/null | head -30 >> "$OUT/summary.txt"
cat "$OUT/summary.txt"; tail -40 /tmp/tp_stdout.txt
