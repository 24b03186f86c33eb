#!/bin/bash
# Call 6 (2026-12-04 fifth session, issue 18): `tune_moe.py --span`'s key guard (d81f4de) on the GPU.
# 1. tests/kernels/test_tune_moe_script.py on CUDA (its new tests use stand-in timings; the others the real kernels).
# 2. The case it was made for: Qwen3 NVFP4 at T = 256 over 256 and 384 (call 3: the fallback's 64-row tiles won the
#    mean, 145.0 + 77.5 against 155.2 + 83.4 us, and made the 256-sequence step 2.4-3.6% slower), into a scratch --out.
#    Prediction: the fallback pair wins the mean again, is more than 1% slower than key 128's 16-row pair at T = 256
#    itself (3-8%), and the guard writes the pair in use, naming both ends' times.
source scripts/device/env.sh
base=$OUT
trap 'cd $base && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 120 python3 -m pytest -p no:cacheprovider -q -rf tests/kernels/test_tune_moe_script.py > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s): $(tail -1 $OUT/tests.log)"; grep -E "^(FAILED|ERROR)" $OUT/tests.log | head
mkdir -p $OUT/cfg && cp src/quickmoe/kernels/configs/*.json $OUT/cfg/
PYTHONPATH=src timeout 150 python3 scripts/tune_moe.py --shapes qwen3-30b-a3b --format nvfp4 --tokens 256 \
  --out $OUT/cfg > $OUT/tune.log 2>&1
echo "tune rc $? ($SECONDS s)"; grep -E "T=256" $OUT/tune.log | cut -c1-900
rm -rf $OUT/cfg
