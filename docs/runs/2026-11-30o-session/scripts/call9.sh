#!/usr/bin/env bash
# Session 2026-11-30o call 9 (nvidia-h200, the warm machine of call 8): the CUDA-only tests of test_fused_moe.py that
# call 8 did not reach in its time; stopped by its own 140 s limit after 38 passed, none failed.
source scripts/device/env.sh >/dev/null 2>&1; timeout -k 5 140 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe.py -k "on_the_gpu or one_dot_gives or sixteen_row_tiles_bits" 2>&1 | tail -4
