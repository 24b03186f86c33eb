#!/usr/bin/env bash
# Issue 19's GPU runs (the trained embedded model), on the device machine from the repository root; logs under
# $OUT. Needs the wheels of scripts/device/fetch_wheels.sh carried in .whl/. Stages, in the order given (each fits
# one 10-minute call; several may be given):
#   tests     the quality GPU tests (tests/models/test_quality_gpu.py: path agreement and batch invariance on the
#             trained model, thresholds of the issue) and the embedded model's CPU checks run on the GPU machine
#   bf16      bench quality, 64 prompts x 128 tokens, base dtype bfloat16 (the serving default on CUDA)
#   float32   bench quality, 64 prompts x 128 tokens, base dtype float32
#   train     scripts/train_demo_model.py --device cuda into /tmp/demo-gpu (<= 10 minutes), then bench quality
#             float32/bf16 rows on what it wrote (CPU training is what ships; this checks the GPU path and time)
set -uo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/gpu.txt"

for stage in "$@"; do
  echo "== stage $stage ($(date +%T))"
  case "$stage" in
    tests)
      # -rP: the agreement table lands in the log when the tests pass as well (the margin to the 99% bar)
      python3 -m pytest -q -rP -p no:cacheprovider tests/models/test_quality_gpu.py \
        tests/models/test_embedded_model.py 2>&1 | tee "$OUT/quality_tests.log" | tail -15 ;;
    bf16|float32)
      dtype=$([ "$stage" = bf16 ] && echo bfloat16 || echo float32)
      python3 -m quickmoe bench quality --dtype "$dtype" --num-prompts 64 --max-tokens 128 \
        --json "$OUT/bench_quality_$stage.json" 2>&1 | tee "$OUT/bench_quality_$stage.log" | grep -v INFO ;;
    train)
      timeout 660 python3 scripts/train_demo_model.py --device cuda --out /tmp/demo-gpu --state /tmp/demo-gpu.pt \
        --max-minutes 8 2>&1 | tee "$OUT/train_gpu.log" | grep -E "SUMMARY|step [0-9]*00 |perplexity|corpus"
      [ -f /tmp/demo-gpu/config.json ] && python3 -m quickmoe bench quality /tmp/demo-gpu --num-prompts 16 \
        --max-tokens 64 --only "float32 vs bf16,alone" 2>&1 | tee "$OUT/bench_quality_gpu_trained.log" | grep -v INFO ;;
    *) echo "unknown stage $stage (expected tests, bf16, float32, train)"; exit 2 ;;
  esac
done
echo "== done ($(date +%T))"
