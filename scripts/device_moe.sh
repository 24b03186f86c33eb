#!/usr/bin/env bash
# The MoE issue's GPU run, on the device machine, from the repository root; logs under $OUT. Needs the
# wheels of scripts/fetch_device_wheels.sh carried in .whl/.
#   1. the kernels' tests on the GPU (all of tests/kernels: small shapes and gpt-oss-20b shapes against
#      float64) and the model with --moe-kernels triton against the torch path,
#   2. quickmoe bench moe on gpt-oss-20b and -120b shapes (all baselines, ceilings measured in the run).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
[ "${SKIP_TESTS:-0}" = 1 ] || python3 -m pytest -q tests/kernels tests/models/test_moe_kernels_in_model.py 2>&1 | tee "$OUT/kernel_gpu_tests.log" | tail -3
python3 -m quickmoe bench moe --json "$OUT/bench_moe.json" 2>&1 | tee "$OUT/bench_moe.log" | grep -v INFO
# `scripts/device_moe.sh tune`: also tune the launch configs (writes src/quickmoe/kernels/configs/*.json under
# $OUT/configs; copy them into the repository after the call), then bench again with them.
if [ "${1:-}" = tune ]; then
  mkdir -p "$OUT/configs"
  python3 scripts/tune_moe.py --out "$OUT/configs" 2>&1 | tee "$OUT/tune_moe.txt" | grep -E "us with|wrote"
  cp "$OUT"/configs/*.json src/quickmoe/kernels/configs/ 2>/dev/null
  python3 -m quickmoe bench moe --json "$OUT/bench_moe_tuned.json" 2>&1 | tee "$OUT/bench_moe_tuned.log" | grep -v INFO
fi
