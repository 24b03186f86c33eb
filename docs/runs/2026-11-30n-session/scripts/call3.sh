#!/usr/bin/env bash
# Session 2026-11-30n call 3 (nvidia-h200): Nsight Compute on the files' tiles and the mma.sync MoE GEMMs at
# gpt-oss-20b's T = 1 and 4: throughput, stall reasons, pipes, memory, occupancy.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
for T in 1 4; do
  timeout -k 5 200 ncu --clock-control none --profile-from-start off \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section InstructionStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,sm__cycles_elapsed.avg,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed" \
    python3 scripts/probes/moe_sync_ncu_probe.py --tokens $T --variants 2.1.4.2,4.1.4.1 > "$OUT/ncu_t$T.txt" 2>&1
  echo "ncu T=$T: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
done
for T in 1 4; do
  echo "== T=$T" >> "$OUT/summary.txt"
  grep -E "^  [a-z_0-9]+kernel|Duration|DRAM Throughput|Memory Throughput|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Active Warps Per Sch|Eligible Warps|Registers Per|Achieved Occupancy|Theoretical Occ|stalled_(long|short|wait|math|no_inst|barrier|mio|lg|selected|not_sel|dispatch|drain|branch|tex|sleep)[a-z_]*_per_issue_active|pipe_(alu|fma|fmaheavy)|dram__bytes_read|sector_hit|inst_executed.sum|Executed Ipc A" \
    "$OUT/ncu_t$T.txt" | sed 's/  */ /g' | head -200 >> "$OUT/summary.txt"
done
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
