#!/usr/bin/env bash
# Session 2026-11-30i call 5 (nvidia-h200): the staging GPU tests against a planted bug (begin_step does not wait
# for the event of the step that last used the buffer), then against the work tree.
set -uo pipefail
source scripts/device/env.sh
for tree in planted new; do
  root=$PWD; [ "$tree" != new ] && root=$PWD/.ab/$tree
  PYTHONPATH=/tmp/site:$root/src timeout -k 5 120 python3 -m pytest -q -rA -p no:cacheprovider -m gpu \
    tests/models/test_pinned_staging.py > "$OUT/staging_$tree.log" 2>&1
  echo "-- $tree: exit $?: $(tail -1 "$OUT/staging_$tree.log")" | tee -a "$OUT/summary.txt"
  grep -E "^(FAILED|PASSED)|^E  .*(Mismatch|mismatch|Max abs)" "$OUT/staging_$tree.log" | head -8 | tee -a "$OUT/summary.txt"
done
