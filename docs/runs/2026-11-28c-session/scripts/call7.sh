#!/usr/bin/env bash
# Session 2026-11-28c, call 7: gpt-oss-20b's weights_ready against import torch with the same bytecode cache
# (bench coldstart --import-floor, new).
set -uo pipefail
source scripts/device/env.sh
G=/tmp/gpt-oss-20b
[ -f $G/config.json ] || python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q
timeout 200 python3 -m quickmoe bench coldstart $G -n 3 --device cuda --import-floor --json "$OUT/cold_20b_floor.json" \
  2>&1 | grep -v INFO | tee "$OUT/cold_20b_floor.txt"
echo "== done $(date +%T)"
