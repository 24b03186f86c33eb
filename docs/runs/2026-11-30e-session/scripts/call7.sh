#!/usr/bin/env bash
# Session 2026-11-30e call 7 (nvidia-h200): the register-operand Gluon variant timed with wait(1) and wait(0), then
# Nsight Compute on the four T = 256 GEMM 1 kernels (Triton, Gluon shared-operand, Gluon register-operand x 2).
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 240 python3 scripts/probes/gluon_mxfp4_probe.py --json "$OUT/gluon_mxfp4.json" > "$OUT/gluon_mxfp4.log" 2>&1
echo "gluon probe: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
grep -v -i warn "$OUT/gluon_mxfp4.log" | grep -v "K steps" | tail -12 | tee -a "$OUT/summary.txt"
s=$(date +%s)
timeout -k 5 300 ncu --clock-control none --profile-from-start off --kernel-name regex:"gemm1|mxfp4" \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section Occupancy --section LaunchStats \
  --section InstructionStats \
  --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed.sum,sm__cycles_elapsed.avg,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_barrier.ratio,smsp__average_warp_latency_issue_stalled_wait.ratio,smsp__average_warp_latency_issue_stalled_short_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_math_pipe_throttle.ratio,smsp__average_warp_latency_issue_stalled_mio_throttle.ratio,smsp__average_warp_latency_issue_stalled_lg_throttle.ratio,smsp__average_warp_latency_issue_stalled_membar.ratio,smsp__average_warp_latency_issue_stalled_sleeping.ratio,smsp__average_warp_latency_issue_stalled_dispatch_stall.ratio \
  python3 scripts/probes/gluon_mxfp4_probe.py --profile-once > "$OUT/ncu_gemm1_t256.txt" 2>&1
echo "ncu: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
grep -E "^  [_a-zA-Z].*\(|Duration|L1/TEX Cache Throughput|DRAM Throughput|Compute \(SM\)|Issued Ipc|stalled|Registers Per|Achieved Active|Eligible Warps" \
  "$OUT/ncu_gemm1_t256.txt" | head -120 | tee -a "$OUT/summary.txt"
