#!/usr/bin/env bash
# Session 2026-11-29c, call 1: Nsight Compute's stall reasons of the decode-sized MoE GEMMs (issue 15); Qwen3-30B-A3B
# NVFP4 cold starts with 16 (default), 8 and 4 reader threads in turns (issue 18: is the consumer waiting on the GIL?).
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
(python3 -m quickmoe make-checkpoint /tmp/q3nvfp4 --preset qwen3-30b-a3b --weights nvfp4 -q > "$OUT/make.log" 2>&1; echo "made: exit $?" >> "$OUT/make.log") &
timeout 200 ncu --profile-from-start off --kernel-name regex:gemm --section SpeedOfLight --section WarpStateStats \
  --section Occupancy --section LaunchStats --section SchedulerStats \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
  python3 scripts/probes/moe_variant_probe.py --profile-once --configs swap32w2 --variants tree \
  > "$OUT/ncu_moe.txt" 2>&1
echo "ncu exit $? at $SECONDS s: $(grep -c 'gemm' "$OUT/ncu_moe.txt") lines naming gemm"
grep -E "_kernel|Duration|Warp Cycles Per Issued|Eligible Warps|Issued Warp|Achieved Occupancy|stalled" "$OUT/ncu_moe.txt" \
  | grep -v " 0$" | head -120
wait; echo "checkpoint made at $SECONDS s: $(tail -1 "$OUT/make.log")"
report() { grep -E "^(imports|config|build|load|process|weights_ready) |import torch alone|read \+ host" "$1"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['reports']['quickmoe']
for x in r: l=x['info']['loader']; print('  loader: seconds %.3f deliver %.3f validate %.3f wait %.3f copies %d calls %d' % (l['seconds'], l['deliver_seconds'], l['validate_seconds'], l['wait_seconds'], l.get('direct_copies', -1), l.get('copy_calls', -1)))" "$2" 2>&1 | tail -3; }
for turn in "16 a" "8 a" "4 a" "16 b" "8 b" "4 b"; do
  set -- $turn
  [ $SECONDS -gt 500 ] && { echo "stopping: $SECONDS s gone"; break; }
  QUICKMOE_LOADER=threads=$1 python3 -m quickmoe bench coldstart /tmp/q3nvfp4 -n 3 --device cuda --import-floor \
    --json "$OUT/qwen_t$1_$2.json" > "$OUT/qwen_t$1_$2.txt" 2>&1
  echo "== Qwen3 NVFP4 threads=$1 turn $2 exit $? ($SECONDS s)"; report "$OUT/qwen_t$1_$2.txt" "$OUT/qwen_t$1_$2.json"
done
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls
