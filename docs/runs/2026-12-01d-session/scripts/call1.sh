#!/bin/bash
# Call 1 (2026-12-01 fourth session): Nsight Compute on prefill attention (ours, then SDPA) at 4 x 2,048 and 16 x 512,
# gpt-oss shapes: where the whole-tile loop's cycles go. Then the masked tiles' one-compare mask (work tree) against
# the base (.ab/base = 54e6c29's src) in turns: the prefill sweep's default launch, gpt-oss and Qwen3 heads.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
ncu --version | tail -1
for point in 4x2048 16x512; do
  timeout 150 ncu --profile-from-start off --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section InstructionStats \
    --section SourceCounters --import-source no --export $OUT/prefill_$point -f \
    python3 scripts/probes/attention_ncu_probe.py --prefill --batch ${point%x*} --context ${point#*x} \
    > $OUT/ncu_prefill_$point.txt 2>&1
  echo "ncu $point rc $? ($SECONDS s)"
  timeout 60 ncu -i $OUT/prefill_$point.ncu-rep --page source --csv --print-source sass --kernel-name regex:prefill \
    > $OUT/sass_prefill_$point.csv 2> $OUT/sass_prefill_$point.err
  echo "source page $point rc $? ($(wc -c < $OUT/sass_prefill_$point.csv) bytes)"
done
grep -E "^  [a-zA-Z_].*\(|Duration|Registers Per|Achieved Occupancy|Executed Ipc A|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Stall|Theoretical Occ|Block Limit" \
  $OUT/ncu_prefill_4x2048.txt | head -60
for round in 1 2; do
  for tree in new base; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/.ab/base/src
    for shape in gptoss:64,8,64 qwen3:32,4,128; do
      PYTHONPATH=/tmp/site:$src timeout 60 python3 scripts/probes/prefill_attention_sweep.py --heads ${shape#*:} \
        --block-q 16 --block-n 64 --warps 8 --stages 2 --orders 1 --maxnreg 128 \
        --json $OUT/mask_${shape%%:*}_${tree}_r$round.json > $OUT/mask_${shape%%:*}_${tree}_r$round.log 2>&1
      echo "mask ${shape%%:*} $tree round $round rc $? ($SECONDS s)"
    done
  done
done
for f in $OUT/mask_*.log; do echo "== $f"; grep -E '^\|' $f | head -4; done
