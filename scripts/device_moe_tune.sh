#!/usr/bin/env bash
# MoE kernel work on the device machine, from the repository root; logs under $OUT. Needs .whl/ carried.
#   scripts/device_moe_tune.sh TOKENS [QUICK_TOKENS] [SHAPES]
# 1. tests/kernels on the GPU (stops at the first failure), 2. tune_moe.py on TOKENS (full grid) and
# QUICK_TOKENS (a few candidates), configs written to $OUT/configs and copied into the work tree,
# 3. bench moe on SHAPES with the configs.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
TOKENS=${1:-1,16}; QUICK=${2:-}; SHAPES=${3:-gpt-oss-20b}
python3 -m pytest -q -x tests/kernels 2>&1 | tee "$OUT/kernel_gpu_tests.log" | tail -3
python3 scripts/kernel_ptx_stats.py 2>&1 | tail -12
mkdir -p "$OUT/configs" "$OUT/configs_quick"
cp src/quickmoe/kernels/configs/*.json "$OUT/configs/" 2>/dev/null  # earlier token counts are kept
python3 scripts/tune_moe.py --shapes "$SHAPES" --tokens "$TOKENS" --out "$OUT/configs" 2>&1 | tee "$OUT/tune.txt" | grep -v skipped
[ -n "$QUICK" ] && python3 scripts/tune_moe.py --quick --shapes "$SHAPES" --tokens "$QUICK" --out "$OUT/configs_quick" 2>&1 \
  | tee "$OUT/tune_quick.txt" | grep -v skipped
cp "$OUT"/configs/*.json src/quickmoe/kernels/configs/ 2>/dev/null
python3 -m quickmoe bench moe --shapes "$SHAPES" --json "$OUT/bench_moe.json" 2>&1 | tee "$OUT/bench_moe.log" | grep -v "INFO\|^\[transformers"
