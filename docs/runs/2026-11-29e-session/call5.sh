#!/usr/bin/env bash
# Session 2026-11-29e, call 5: the rotary table filled on a thread beside the load (TablesStart; work tree) against
# .ab/base = HEAD (computed inside build_model): GPU tests, 16 greedy tokens equal, bench coldstart of the 20b in turns.
set -uo pipefail
source scripts/device/env.sh
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make_20b.log" 2>&1; echo "20b made: exit $? ($SECONDS s)"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/unit/test_tables_start.py tests/unit/test_cublas_start.py \
  tests/unit/test_layers.py > "$OUT/tables_tests.log" 2>&1
echo "tests: exit $?, $(tail -1 "$OUT/tables_tests.log") ($SECONDS s)"
for tree in new base; do
  root=$PWD; [ $tree != new ] && root=$PWD/.ab/base
  PYTHONPATH=/tmp/site:$root/src timeout 90 python3 -m quickmoe generate /tmp/gpt-oss-20b --prompt "The capital of France is" \
    --max-tokens 16 --temperature 0 --ignore-eos --device cuda --json > "$OUT/greedy_$tree.json" 2> "$OUT/greedy_$tree.log"
  echo "greedy $tree: exit $? ($SECONDS s)"
done
python3 - "$OUT" <<'PY'
import json, sys
def ids(t):
    d = json.load(open(f"{sys.argv[1]}/greedy_{t}.json"))
    for k in ("token_ids", "output_token_ids", "tokens"):
        if k in d: return d[k]
    return d.get("choices", [{}])[0].get("token_ids", d)
a, b = ids("new"), ids("base")
print("greedy token ids equal:", a == b, str(a)[:120])
PY
for turn in a b; do
  for tree in new base; do
    [ $SECONDS -gt 330 ] && { echo "stopping: $SECONDS s"; break 2; }
    root=$PWD; [ $tree != new ] && root=$PWD/.ab/base
    PYTHONPATH=/tmp/site:$root/src timeout 80 python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 3 --device cuda \
      --import-floor --json "$OUT/cold_20b_${tree}_$turn.json" > "$OUT/cold_20b_${tree}_$turn.txt" 2>&1
    echo "coldstart $tree $turn: exit $? ($SECONDS s)"
    grep -E "^(imports|build|load|process|capture|weights_ready|total) |weights_ready adds" "$OUT/cold_20b_${tree}_$turn.txt" | cut -c1-160
  done
done
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
