#!/bin/bash
# session 2026-11-29 ninth, call 5: the GPU tests of the MoE GEMMs after their common set-up became one helper
source scripts/device/env.sh
E=tests/kernels/test_fused_moe.py::test_eight_row_tiles_give_the_sixteen_row_tiles_bits
P=tests/kernels/test_fused_moe.py::test_k_in_parts_on_the_gpu_are_deterministic_and_near_one_part
ids=()
for f in mxfp4 bf16 fp8 nvfp4; do ids+=("$P[1-$f]" "$P[8-$f]" "$E[64-4-1-$f]" "$E[32-2-40-$f]"); done
timeout 280 python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > $OUT/tests.txt 2>&1
tail -3 $OUT/tests.txt
