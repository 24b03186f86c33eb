#!/bin/bash
# Call 8 (2026-12-04 third session, issue 18): FP8 step factors one K step ahead for tiles of >= 64 rows with one
# weight scale a tile (work tree) against .ab/main (ead5fd7 + c7a9abe's files: the same kernels as HEAD's).
# Call 2's Nsight Compute put GEMM 1's largest stall on the long scoreboard; the factors' loads (the activation
# scales gathered per row, the weight scale) were issued in the step, after its dot.
# Prediction: GEMM 1 and GEMM 2 at T = 2,048-8,192 -2 to -8% alone if the loads' latency was exposed; a loss
# where the factors' registers cost a program an SM (the tiles sit at 168 registers, the limit of three).
# Each GEMM alone (`moe_config_sweep.py --tuned-only --registers`), trees in turns; then the new path's tests on CUDA.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
MAIN=/tmp/site:$PWD/.ab/main/src
NEW=/tmp/site:$PWD/src
sweep() {  # TREE SHAPE T
  local P=$NEW; [ $1 = main ] && P=$MAIN
  PYTHONPATH=$P:$PWD/scripts timeout 60 python3 scripts/probes/moe_config_sweep.py --shape $2 --format fp8 \
    --tokens $3 --tuned-only --registers > $OUT/sweep_$2_$3_$1.log 2>&1
  echo "$1 $2 T=$3 rc $? ($SECONDS s): $(grep -E '^ +[0-9.]+ us' $OUT/sweep_$2_$3_$1.log | awk '{print $1}' | tr '\n' ' ')\
$(grep -E '^gemm[12]:' $OUT/sweep_$2_$3_$1.log | grep -o '[0-9]* registers, [0-9]* spilled' | tr '\n' ' ')"
}
sweep main qwen3-30b-a3b 8192; sweep new qwen3-30b-a3b 8192
sweep new qwen3-30b-a3b 4096; sweep main qwen3-30b-a3b 4096
sweep main qwen3-30b-a3b 2048; sweep new qwen3-30b-a3b 2048
sweep new mixtral-8x7b 2048; sweep main mixtral-8x7b 2048
timeout 60 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_fused_moe_quantized.py \
  -k "step_factors_belong or (shipped and qwen3 and fp8)" > $OUT/gpu_tests.log 2>&1
echo "gpu tests: $(tail -1 $OUT/gpu_tests.log) ($SECONDS s)"
