#!/usr/bin/env bash
# Session 2026-11-29b, call 3: decode attention configs with deeper pipelines on the H200 in turns (issue 15); where an
# uncapped batched-copy start crashes (faulthandler), and the batch probe into separate tensors (issue 18).
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 .ab/cfg_ab.py "$OUT/cfg_ab.json" 2>&1 | grep -v Warning | tee "$OUT/cfg_ab.txt"
echo "after configs: $SECONDS s"
python3 .ab/batch_probe2.py 2>&1 | tee "$OUT/batch_probe2.txt"
start=$SECONDS
python3 scripts/probes/many_tensors_probe.py write /tmp/q3many --weights nvfp4 > /dev/null 2>&1
echo "wrote /tmp/q3many in $((SECONDS - start)) s"
for run in "64 a" "0 a" "0 b"; do
  set -- $run
  python3 -X faulthandler .ab/uncapped.py $1 /tmp/q3many > "$OUT/uncapped_$1_$2.log" 2>&1
  echo "== generate on q3many, MAX_BATCH $1 (0: uncapped): exit $?"; grep -v -E "^(INFO|\s*$)" "$OUT/uncapped_$1_$2.log" | tail -25
done
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls
