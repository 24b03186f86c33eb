#!/usr/bin/env bash
# Session 2026-11-29e, call 4: the load plan, now on by default, on Qwen3-30B-A3B FP8 (37,500 tensors): bench coldstart
# with the defaults and with QUICKMOE_LOAD_PLAN_CACHE=0, in turns.
set -uo pipefail
source scripts/device/env.sh
python3 -m quickmoe make-checkpoint /tmp/q3fp8 --preset qwen3-30b-a3b --weights fp8 -q > "$OUT/make_q3fp8.log" 2>&1
echo "made: exit $? ($SECONDS s)"
for turn in a b; do
  for cache in default 0; do
    [ $SECONDS -gt 470 ] && { echo "stopping: $SECONDS s"; break 2; }
    if [ $cache = default ]; then unset QUICKMOE_LOAD_PLAN_CACHE; else export QUICKMOE_LOAD_PLAN_CACHE=0; fi
    timeout 100 python3 -m quickmoe bench coldstart /tmp/q3fp8 -n 3 --device cuda --import-floor \
      --json "$OUT/cold_q3fp8_plan_${cache}_$turn.json" > "$OUT/cold_q3fp8_plan_${cache}_$turn.txt" 2>&1
    echo "== plan $cache $turn: exit $? ($SECONDS s)"
    grep -E "^(imports|config|build|load|capture|weights_ready|total) |weights_ready adds|cached load plan" \
      "$OUT/cold_q3fp8_plan_${cache}_$turn.txt" | sed 's/.*driver calls; //' | cut -c1-160
  done
done
unset QUICKMOE_LOAD_PLAN_CACHE
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
