#!/bin/bash
# Call 9 (2026-12-02 second session): the FP8 decode test in its final form (bounds from call 8's figures; the
# GEMVs' calls counted; a tensor-core variant with both GEMVs' bounds 0).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 120 python3 -m pytest -q -s -p no:cacheprovider -m gpu tests/models/test_parity_families.py \
  > $OUT/test.log 2>&1
echo "rc $? ($SECONDS s): $(tail -1 $OUT/test.log)"; grep -E "sequence|^E  " $OUT/test.log | head -30
