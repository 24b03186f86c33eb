#!/bin/bash
# Call 8 (2026-12-02 second session): call 7's FP8 decode test failed its bf16-noise bound (decode vs prefill 0.058
# and 0.028 for the sequence decoded alone). The test now prints every sequence before asserting; it runs with the
# defaults and with both GEMVs off (QUICKMOE_FP8_GEMV_MAX_TOKENS=0 QUICKMOE_FP8_DENSE_GEMV_MAX_TOKENS=0: the
# tensor-core kernels at every size) to tell the GEMVs' part from the FP8 activations' own rounding flips.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
T="tests/models/test_parity_families.py -k decode_steps"
timeout 100 python3 -m pytest -q -s -p no:cacheprovider -m gpu $T > $OUT/test_default.log 2>&1
echo "default rc $? ($SECONDS s): $(tail -1 $OUT/test_default.log)"; grep -E "sequence" $OUT/test_default.log
QUICKMOE_FP8_GEMV_MAX_TOKENS=0 QUICKMOE_FP8_DENSE_GEMV_MAX_TOKENS=0 timeout 100 python3 -m pytest -q -s \
  -p no:cacheprovider -m gpu $T > $OUT/test_gemvs_off.log 2>&1
echo "gemvs off rc $? ($SECONDS s): $(tail -1 $OUT/test_gemvs_off.log)"; grep -E "sequence" $OUT/test_gemvs_off.log
