#!/usr/bin/env bash
# Session 2026-11-30k call 2 (nvidia-h200-x2). Nsight Compute on the register-operand GEMMs at gpt-oss-20b's T = 256
# (64-row tiles, the H200 file's key 256): stall reasons, pipes, memory (GPU 0), and the per-SASS-instruction stall
# samples of GEMM 1 (GPU 1).
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
export PYTHONPATH=src
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
( CUDA_VISIBLE_DEVICES=0 timeout -k 5 300 ncu --clock-control none --profile-from-start off --kernel-name regex:register \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section Occupancy --section LaunchStats \
  --section InstructionStats \
  --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__cycles_elapsed.avg,lts__t_bytes.sum,dram__bytes_read.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum" \
  python3 scripts/probes/moe_register_ncu_probe.py > "$OUT/ncu_t256.txt" 2>&1
  echo "ncu sections: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt" ) &
p0=$!
( CUDA_VISIBLE_DEVICES=1 timeout -k 5 300 ncu --clock-control none --profile-from-start off \
  --kernel-name regex:gemm1_register --section SourceCounters --section WarpStateStats --import-source no \
  --page source --print-source sass --csv \
  python3 scripts/probes/moe_register_ncu_probe.py > "$OUT/ncu_source_gemm1.csv" 2>&1
  echo "ncu source: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt" ) &
p1=$!
while kill -0 $p0 2>/dev/null || kill -0 $p1 2>/dev/null; do sleep 2; done
grep -E "register_kernel|Duration|Throughput|Stall|stall|Warp Cycles|Eligible|Issued|Active Warps|Registers|Achieved Occ|Shared Memory|Block Limit|ratio|gmma|inst_executed|cycles_elapsed|bytes|wavefronts|Pipe" \
  "$OUT/ncu_t256.txt" | head -160 >> "$OUT/summary.txt"
wc -l "$OUT/ncu_source_gemm1.csv" >> "$OUT/summary.txt"
head -c 1500 "$OUT/ncu_source_gemm1.csv" >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt" | head -150
