#!/usr/bin/env bash
# Session 2026-11-30e call 3 (nvidia-h200): Nsight Compute on the T = 256 MXFP4 GEMM 1, the engine's Triton tile
# and the Gluon probe's (decode beside the wgmma): where the cycles go.
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 300 ncu --clock-control none --profile-from-start off --kernel-name regex:"gemm1|mxfp4" \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section Occupancy --section LaunchStats \
  --section InstructionStats \
  --metrics smsp__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,smsp__inst_executed.sum,sm__cycles_elapsed.avg \
  python3 scripts/probes/gluon_mxfp4_probe.py --profile-once > "$OUT/ncu_gemm1_t256.txt" 2>&1
echo "ncu: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"
grep -E "^  [_a-zA-Z].*\(|Duration|Throughput|Pipe|Stall|stall|Warp Cycles|Eligible|Issued|Active Warps|Registers|Bank|wavefronts|tensor|gmma|inst_executed|cycles_elapsed|No Eligible|Achieved Occ|Shared" \
  "$OUT/ncu_gemm1_t256.txt" | head -120 | tee -a "$OUT/summary.txt"
