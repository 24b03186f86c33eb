#!/usr/bin/env bash
# QUICKMOE_CAPTURE_WARMUP=prefix (executor/capture_warmup.py, off by default) against the default `all`, for the
# first session lent an H100 (written 2026-12-05, fourth session, which had no device). One call, ~6-8 min, carry
# [".whl"]:
#   bash scripts/device/coldstart2.sh capture-ab
#
# Prediction (written before any run). The H100's capture phase on 2026-12-05 (call 2, first session, tree d8ba727)
# was 0.45-0.64 s, median 0.561: the four start-up buckets' eager warm-ups 0.28 s (bucket 8, the first, 0.14-0.18 s:
# the modules' loads and one eager step over 24 layers; buckets 4, 2, 1 0.03-0.06 s each: the eager step's Python),
# their captures 0.15 s, the MoE warm-up of sizes 1-8 the rest. Over 3 of the 24 layers the eager step's Python
# is ~1/8: the later warm-ups ~0.005-0.01 s each, the first ~0.12-0.15 s. So:
#   - capture phase 0.40-0.46 s against 0.52-0.60 s for `all` in the same call (issue 16's goal <= 0.5 s met by the
#     median); first token and total 0.10-0.15 s shorter; weights_ready unchanged (the phases before capture);
#   - no capture with `prefix_retry`, every warm-up over 3 layers; the GPU tests (test_capture_warmup.py's GPU test,
#     the decode and prompt graphs' tests) pass.
# If a retry shows up, the prefix misses a kernel variant the whole step launches: the retry keeps the start safe
# but costs a failed capture; find the kernel (the retry's message) before merging.
# Make `prefix` the default if the capture phase is shorter in both turns and nothing retried; then
# `coldstart2.sh serve` for /health.
set -euo pipefail
bash scripts/device/coldstart2.sh capture-ab
