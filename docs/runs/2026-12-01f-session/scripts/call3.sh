#!/bin/bash
# Call 3 (2026-12-01 sixth session): issue 16's warm compile phase, new (work tree: torch's source key from
# quickmoe's cache, the KV caches' and rotary table's fixed sizes marked static) against .ab/base (f82994b):
# `quickmoe generate /tmp/gpt-oss-20b --max-tokens 1 --device cuda --compile on` with warm caches, in turns, five
# rounds (one untimed start of each tree first); each start's report (--startup-json) and compile log line. The new
# unit and compile tests on this torch while the checkpoint is made.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
G=/tmp/gpt-oss-20b
[ -f $G/config.json ] || timeout 150 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > /dev/null
echo "checkpoint ($SECONDS s)"
[ "${TESTS:-1}" = 1 ] && timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/unit/test_torch_key.py tests/models/test_compile.py \
  > $OUT/tests.log 2>&1 &
start() {  # start TREE NAME
  local src=$PWD/src; [ $1 = base ] && src=$PWD/.ab/base/src
  PYTHONPATH=/tmp/site:$src timeout 120 python3 -m quickmoe generate $G -p Hello --max-tokens 1 --device cuda --compile on \
    --startup-json $OUT/$2.json > $OUT/$2.log 2>&1
  echo "$2 rc $? ($SECONDS s): $(grep -o 'compiled [0-9]* graphs.*' $OUT/$2.log | cut -c1-260)"
}
start new warm_new; start base warm_base
wait; echo "tests: $(tail -1 $OUT/tests.log) ($SECONDS s)"
for i in 1 2 3 4 5; do start new new_$i; start base base_$i; done
python3 - $OUT <<'PY'
import json, statistics, sys, glob
out = sys.argv[1]
for tree in ("new", "base"):
    reps = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{tree}_[0-9].json"))]
    def med(get):
        xs = [x for x in (get(r) for r in reps) if x is not None]
        return round(statistics.median(xs), 3) if xs else None
    comp = lambda k: med(lambda r: (r.get("info", {}).get("compile") or {}).get(k))
    print(tree, len(reps), "starts: phases", {p: med(lambda r, p=p: r.get("phases", {}).get(p)) for p in
          ("imports", "load", "process", "compile", "capture")},
          "total", med(lambda r: r.get("total")), "compile parts", {k: comp(k) for k in
          ("imports_s", "torch_key_s", "dynamo_s", "backend_s", "key_s", "warmup_s")})
PY
