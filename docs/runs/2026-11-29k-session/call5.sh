#!/bin/bash
# session 2026-11-29 eleventh, call 5: gpt-oss-20b GEMM 2 at key 256 transposed (106.5 against 129.6 us alone; the
# layer 297 against 326 us at T = 256, call 4): GPU tests of the 20b shapes, repeated runs of the new tile (it is
# MXFP4's twin of the unreliable NVFP4 class: transposed, 4 warps, 64 rows), then bench generate 256 x 1000 -> 1000
# in turns against HEAD (.ab/base)
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
CKPT=/tmp/gpt-oss-20b
python3 -m quickmoe make-checkpoint $CKPT --preset gpt-oss-20b -q > $OUT/make.txt 2>&1 &
timeout 150 python3 -m pytest -q -p no:cacheprovider "tests/kernels/test_fused_moe.py::test_fused_moe_gpt_oss_20b_shapes_on_the_gpu" \
  > $OUT/tests.txt 2>&1; echo "tests: $(tail -1 $OUT/tests.txt) ($SECONDS s)"
P=scripts/probes/moe_tile_repeat_probe.py
timeout 120 python3 $P --shape gpt-oss-20b --tokens 256 --runs 30 --variants shipped > $OUT/repeat_256.txt 2>&1
echo "repeat 256 exit $? ($SECONDS s)"; grep -v Warn $OUT/repeat_256.txt | tail -2
timeout 60 python3 $P --shape gpt-oss-20b --tokens 448 --runs 15 --variants shipped > $OUT/repeat_448.txt 2>&1
echo "repeat 448 exit $? ($SECONDS s)"; grep -v Warn $OUT/repeat_448.txt | tail -2
wait
for run in new base new base; do
  [ $SECONDS -gt 520 ] && { echo "skip $run"; continue; }
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src timeout 120 python3 -m quickmoe bench generate $CKPT --num-prompts 256 --input-len 1000 \
    --output-len 1000 > $OUT/gen_${run}_$SECONDS.txt 2>&1
  echo "-- $run ($SECONDS s)"; grep -E "^quickmoe |decode at batch 1: median|by step kind|by op family" $OUT/gen_${run}_*.txt | tail -4
done
cd $OUT && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz .
