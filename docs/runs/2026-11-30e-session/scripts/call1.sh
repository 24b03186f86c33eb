#!/usr/bin/env bash
# Session 2026-11-30e call 1 (nvidia-h200): register caps (MoEKernelConfig.maxnreg) on gpt-oss-20b's H200 MoE tiles
# where registers, not shared memory, bound the programs an SM holds; each GEMM alone in a CUDA graph; then the
# bits test of the caps.
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
sweep() {  # tokens caps gemms tag
  local s=$(date +%s)
  timeout -k 5 150 python3 scripts/probes/moe_config_sweep.py --shape gpt-oss-20b --tuned-only --tokens "$1" \
    --maxnreg "$2" --gemms "$3" --split 1 --top 8 --json "$OUT/sweep_$4.json" > "$OUT/sweep_$4.log" 2>&1
  echo "sweep $4: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
  grep -v -i warn "$OUT/sweep_$4.log" | grep -v "^ *$" | tail -12 | tee -a "$OUT/summary.txt"
}
sweep 256 0,168 1,2 t256
sweep 64 0,96 1 t64
sweep 1024,4096 0,104,168 1,2 t1024_4096
s=$(date +%s)
timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe.py -k register_cap \
  > "$OUT/cap_tests.log" 2>&1
echo "cap tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/cap_tests.log")" | tee -a "$OUT/timeline.txt" "$OUT/summary.txt"
grep -E "^(FAILED|ERROR)|Error" "$OUT/cap_tests.log" | head -10
