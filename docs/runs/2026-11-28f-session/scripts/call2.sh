#!/bin/bash
source scripts/device/env.sh
O=/tmp/o2; mkdir -p $O
echo "== fused fp8 probe $(date +%T)"
timeout 300 python3 .ab/fp8_fused_probe.py 2>&1 | grep -v "^\[transformers\]" | tee $O/fp8_fused_probe.log
echo "== done $(date +%T)"
cp $O/* $OUT/
