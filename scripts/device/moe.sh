#!/usr/bin/env bash
# The MoE issue's GPU validation and benchmark, on the device machine from the repository root; logs under
# $OUT. Needs the wheels of scripts/device/fetch_wheels.sh carried in .whl/.
#   1. every GPU test (pytest -m gpu: the kernels against float64 on gpt-oss-20b shapes, the model with the
#      kernels on against transformers in bf16, the loader and layouts), every kernel test (tests/kernels,
#      small shapes, here on CUDA) and the model with the kernels against the torch path, plus the
#      gpt-oss-20b-shaped logits test on a make-checkpoint directory;
#   2. quickmoe bench moe on gpt-oss-20b and -120b shapes (all baselines, ceilings measured in the run).
# Tuning is scripts/device/moe_tune.sh.
set -uo pipefail
source "$(dirname "$0")/env.sh"
python3 -m pytest -q -m gpu tests 2>&1 | tee "$OUT/gpu_tests.log" | tail -3
python3 -m pytest -q tests/kernels tests/models/test_moe_kernels_in_model.py 2>&1 | tee "$OUT/kernel_tests_on_gpu.log" | tail -2
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q
QUICKMOE_TEST_20B_DIR=/tmp/gpt-oss-20b python3 -m pytest -q -s -m "gpu and slow" tests/models/test_parity.py \
  -k 20b 2>&1 | tee "$OUT/gpu_20b_logits.log" | grep -E "max_abs|rel|passed|failed" | tail -6
rm -rf /tmp/gpt-oss-20b
python3 -m quickmoe bench moe --json "$OUT/bench_moe.json" 2>&1 | tee "$OUT/bench_moe.log" | grep -v "INFO\|^\[transformers"
