#!/bin/bash
# Call 4 (2026-12-05 second session, nvidia-h100-x1): the GPU tests on the tree with calls 1-2's tuned H100 files
# (uncommitted on 33e2907), `hotpath.sh tests` (its four parts side by side): the shipped-config reference test
# with the new gpt-oss-20b / -120b H100 keys as cases, the 8-row tiles' bits, the bf16 batch invariance and
# quality tests, the kernel precompile / warm-up tests, the engine's float32 equivalences on CUDA.
# Prediction: all pass (the tiles are the H200's kinds, whose tests passed there; only the H100 entries are new).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 570 bash scripts/device/hotpath.sh tests 2>&1 | tee $OUT/hotpath_tests.log | tail -40
