#!/usr/bin/env bash
# Session 2026-11-29b, call 4: decode attention configs with deeper pipelines on the H200 in turns, bits compared per
# candidate (issue 15); the uncapped batched-copy start with Triton's and cuBLAS's background starts off (issue 18).
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
(python3 scripts/probes/many_tensors_probe.py write /tmp/q3many --weights nvfp4 > "$OUT/write.log" 2>&1; echo done > /tmp/written) &
python3 .ab/cfg_ab.py "$OUT/cfg_ab.json" 2>&1 | grep -v Warning | tee "$OUT/cfg_ab.txt"
echo "after configs: $SECONDS s"
wait
for run in "0 quiet a" "0 quiet b" "0 busy a"; do
  set -- $run
  python3 -X faulthandler .ab/uncapped.py $1 /tmp/q3many $2 > "$OUT/uncapped_$2_$3.log" 2>&1
  echo "== generate on q3many, uncapped, background starts $2: exit $?"; grep -v -E "^(INFO|\s*$)" "$OUT/uncapped_$2_$3.log" | grep -v "^  File" | tail -8
done
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls
