#!/bin/bash
# Call 7 (2026-12-02 second session): the new GPU test of FP8 decode steps (tests/models/test_parity_families.py::
# test_fp8_decode_steps_on_cuda_match_the_prefill_and_transformers) on the work tree, then on a planted tree
# (.ab/plant: the dense GEMV takes every K step's activation scales from its first step) where it must fail.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 150 python3 -m pytest -q -s -p no:cacheprovider -m gpu tests/models/test_parity_families.py -k decode_steps \
  > $OUT/test_main.log 2>&1
echo "main rc $? ($SECONDS s): $(tail -1 $OUT/test_main.log)"; grep -E "sequence" $OUT/test_main.log
PYTHONPATH=/tmp/site:$PWD/.ab/plant/src timeout 150 python3 -m pytest -q -s -p no:cacheprovider -m gpu \
  tests/models/test_parity_families.py -k decode_steps > $OUT/test_plant.log 2>&1
echo "planted rc $? ($SECONDS s): $(tail -1 $OUT/test_plant.log)"; grep -E "sequence|^E  .*assert" $OUT/test_plant.log | head
