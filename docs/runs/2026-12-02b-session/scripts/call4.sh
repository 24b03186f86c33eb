#!/bin/bash
# Call 4 (2026-12-02 second session): the dense FP8 GEMV's launch grid, since its default (8 rows, 2 warps, 4
# groups a step, K in one part) lost in call 3's model A/B and call 3's probe checked bf16 outputs against a
# float32-sized bound (every variant refused). The probe with the bf16 bound, a sweep at M = 1 (rows 2-16, warps
# 1-4, K in 1, 2 or 4 parts), the defaults at M = 1-16.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 300 python3 scripts/probes/fp8_dense_gemv_probe.py --tokens 1,4,8,16 --sweep-tokens 1 --rows 2,4,8,16 \
  --warps 1,2,4 --groups 4 --split 1,2,4 --json $OUT/dense_probe.json > $OUT/dense_probe.log 2>&1
echo "probe rc $? ($SECONDS s)"; grep -E "^\||best:|wrong|failed" $OUT/dense_probe.log | head -60
