#!/bin/bash
# Call 5 (2026-12-01 sixth session): the compile phase's warm-up steps. "one" (.ab/one: the work tree with a single
# warm-up step, the 3-token prefill) against "new" (the work tree: a 1-token decode, a 2-sequence decode and the
# prefill), `quickmoe generate --compile on` with warm caches, in turns, five rounds, TORCH_LOGS=recompiles; then a
# served-like run of each (3 prompts x 8 tokens) counting recompiles.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
G=/tmp/gpt-oss-20b
[ -f $G/config.json ] || timeout 150 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > /dev/null
echo "checkpoint ($SECONDS s)"
start() {  # start TREE NAME [generate args]
  local src=$PWD/src; [ $1 = one ] && src=$PWD/.ab/one/src; local name=$2; shift 2
  TORCH_LOGS=recompiles PYTHONPATH=/tmp/site:$src timeout 120 python3 -m quickmoe generate $G -p Hello --max-tokens 1 \
    --device cuda --compile on --startup-json $OUT/$name.json "$@" > $OUT/$name.log 2>&1
  echo "$name rc $? ($SECONDS s): recompiles $(grep -c 'Recompiling' $OUT/$name.log); $(grep -o 'compiled [0-9]* graphs.*' $OUT/$name.log | cut -c1-200)"
}
start new warm_new; start one warm_one
for i in 1 2 3 4 5; do start one one_$i; start new new_$i; done
start one many_one -p "The capital of France is" -p "One two three four five six seven" --max-tokens 8
start new many_new -p "The capital of France is" -p "One two three four five six seven" --max-tokens 8
python3 - $OUT <<'PY'
import json, statistics, sys, glob
out = sys.argv[1]
for tree in ("one", "new"):
    reps = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{tree}_[0-9].json"))]
    def med(get):
        xs = [x for x in (get(r) for r in reps) if x is not None]
        return round(statistics.median(xs), 3) if xs else None
    comp = lambda k: med(lambda r: (r.get("info", {}).get("compile") or {}).get(k))
    print(tree, len(reps), "starts: phases", {p: med(lambda r, p=p: r.get("phases", {}).get(p)) for p in
          ("imports", "load", "process", "compile", "capture", "first_token")}, "total", med(lambda r: r.get("total")),
          "compile parts", {k: comp(k) for k in ("imports_s", "torch_key_s", "dynamo_s", "backend_s", "warmup_s")})
PY
