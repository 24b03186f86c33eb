#!/bin/bash
# Call 4 (2026-12-01 eighth session): the routing's top-k as one bitonic top-k over (score, expert) keys instead of
# k rounds of max and argmax (work tree) against main (9effe88, .ab/base). GPU tests of the router and the routing
# on the work tree; router_probe.py (router_route and linear + route, CUDA graphs, gpt-oss-20b / Qwen3 / Mixtral
# router shapes, T = 1-8,192) in turns, two rounds; bench generate gpt-oss-20b 16 x 1000 -> 128 in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
BASE=/tmp/site:$PWD/.ab/base/src
NEW=/tmp/site:$PWD/src
G=/tmp/gpt-oss-20b
timeout 150 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > /dev/null 2>&1 &
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_router.py tests/kernels/test_routing.py \
  > $OUT/router_tests.log 2>&1
echo "router tests: $(tail -1 $OUT/router_tests.log) ($SECONDS s)"
for round in 1 2; do
  for tree in new base; do
    P=$NEW; [ $tree = base ] && P=$BASE
    PYTHONPATH=$P timeout 90 python3 scripts/probes/router_probe.py --sweep '' --no-dense > $OUT/router_${tree}_r$round.log 2>&1
    echo "router probe $tree round $round rc $? ($SECONDS s)"
  done
done
wait
for tree in new base; do
  P=$NEW; [ $tree = base ] && P=$BASE
  PYTHONPATH=$P timeout 110 python3 -m quickmoe bench generate $G --num-prompts 16 --input-len 1000 --output-len 128 \
    --json $OUT/gen_${tree}.json > $OUT/gen_${tree}.log 2>&1
  echo "generate $tree rc $? ($SECONDS s)"
done
for f in $OUT/router_*_r*.log; do echo "== $f"; grep -v "^\s*$" $f | tail -24; done
for f in $OUT/gen_*.log; do echo "== $f"; grep -E 'by op family|batch-1 decode step' $f | cut -c1-200; done
python3 - <<'PY'
import json, os
for tree in ("new", "base"):
    try:
        d = json.load(open(f"{os.environ['OUT']}/gen_{tree}.json"))
    except OSError:
        continue
    for level in ("batch1", "batch16"):
        top = dict(d["op_families"][level]["top"])
        print(tree, level, {k: round(v * 1000, 1) for k, v in top.items() if "route" in k or "router" in k})
PY
echo "($SECONDS s)"
