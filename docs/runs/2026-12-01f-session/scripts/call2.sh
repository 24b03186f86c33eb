#!/bin/bash
# Call 2 (2026-12-01 sixth session): issue 16's warm compile phase. The work tree ("new": torch's source key from
# quickmoe's cache, the KV caches' and rotary table's fixed sizes marked static for Dynamo) against .ab/base (f82994b):
# `bench coldstart --compile -n 3` (fresh and warm caches) in turns, two rounds. First: what torch 2.11's torch_key is,
# and the new unit and compile tests on this torch (CPU and GPU-marked), while the checkpoint is made.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
python3 -c "from torch._inductor import codecache as c; import torch; print('torch', torch.__version__, 'torch_key:', type(c.torch_key).__name__, 'set:', hasattr(c.torch_key, 'set'), 'cache_info:', hasattr(c.torch_key, 'cache_info'))" | tee $OUT/torch_key_api.txt
timeout 150 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > /dev/null &
timeout 280 python3 -m pytest -q -p no:cacheprovider -n 4 tests/unit/test_torch_key.py tests/models/test_compile.py \
  > $OUT/tests.log 2>&1
echo "tests: $(tail -1 $OUT/tests.log) ($SECONDS s)"; wait
for round in 1 2; do
  AB_RUNS="new base" timeout 270 bash scripts/device/coldstart2.sh compile-ab > $OUT/compile_ab_r$round.log 2>&1
  echo "compile-ab round $round rc $? ($SECONDS s)"
  mkdir -p $OUT/r$round && mv $OUT/cold2_* $OUT/compile_ab.txt $OUT/r$round/ 2>/dev/null
  cat $OUT/r$round/compile_ab.txt
done
echo "($SECONDS s)"
