#!/bin/bash
# Call 1 (2026-12-02 second session): the two branches prepared last session, rebased on main (3ca6f6e, the work
# tree). .ab/nq = next/fp8-norm-quant (src, tests, scripts): its FP8 kernel tests and kernel count on CUDA, then
# bench generate Qwen3-30B-A3B FP8 16 x 1000 -> 128, main / branch in turns, two rounds. .ab/kc =
# next/fp8-gemv-k-chunks (src, scripts): fp8_gemv_probe.py sweeping 128-column groups a step (1 = main's kernels).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
MAIN=/tmp/site:$PWD/src
NQ=/tmp/site:$PWD/.ab/nq/src
KC=/tmp/site:$PWD/.ab/kc/src
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
Q=/tmp/qwen3-fp8
(timeout 150 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make.log 2>&1;
 echo "checkpoint rc $?" >> $OUT/make.log) &
(cd .ab/nq && PYTHONPATH=$NQ timeout 220 python3 -m pytest -q -p no:cacheprovider -n 4 \
  tests/kernels/test_glue_kernels.py tests/kernels/test_moe_fp8_gemv.py tests/kernels/test_fp8_gemm.py \
  tests/models/test_kernel_count.py > $OUT/nq_tests.log 2>&1)
echo "nq tests rc $? ($SECONDS s): $(tail -1 $OUT/nq_tests.log)"
wait; tail -1 $OUT/make.log
(cd .ab/kc && PYTHONPATH=$KC timeout 200 python3 scripts/probes/fp8_gemv_probe.py --shapes qwen3-30b-a3b \
  --tokens 1,4,8 --rows 8,16 --warps 1,2 --groups 1,2,4 --json $OUT/kc_probe.json > $OUT/kc_probe.log 2>&1)
echo "kc probe rc $? ($SECONDS s)"; grep -E "best rows|^qwen3|^\|" $OUT/kc_probe.log
for round in 1 2; do
  for tree in main nq; do
    P=$MAIN; [ $tree = nq ] && P=$NQ
    PYTHONPATH=$P timeout 75 python3 -m quickmoe bench generate $Q --num-prompts 16 --input-len 1000 \
      --output-len 128 --json $OUT/gen_${tree}_r$round.json > $OUT/gen_${tree}_r$round.log 2>&1
    echo "round $round $tree rc $? ($SECONDS s)"
    grep -E "^quickmoe |decode at batch 1: median|decode step at batch 1 by" $OUT/gen_${tree}_r$round.log | cut -c1-260
  done
done
echo "($SECONDS s)"
