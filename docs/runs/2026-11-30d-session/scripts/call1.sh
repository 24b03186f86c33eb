#!/bin/bash
# Call 1 (2026-11-30 fourth session, issue 16): where --compile on's phase goes (bench coldstart --compile -n 1 JSON,
# cProfile of a warm and a fresh compiled start), and the stored kernel keys' effect on a warm default start
# (HEAD against 28a4a20 = .ab/keys0, bench coldstart -n 3 --import-floor in turns).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
S=$OUT/summary.txt
timeout 120 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > $OUT/make.log 2>&1
echo "make rc $?" >> $S
export QUICKMOE_CACHE_DIR=/tmp/qc1
timeout 200 python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 1 --device cuda --compile on \
  --json $OUT/compile.json > $OUT/compile.txt 2>&1
echo "compile bench rc $?" >> $S
grep -v INFO $OUT/compile.txt | head -30 >> $S
python3 - >> $S <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/compile.json"))
for series in ("compiled_cold", "compiled_warm"):
    for r in d.get("reports", {}).get(series, []):
        c = r.get("info", {}).get("compile", {})
        print(series, {k: c.get(k) for k in ("imports_s", "dynamo_s", "backend_s", "cache_load_s", "codegen_s",
              "codegen_runs", "key_s", "restarts", "warmup_s", "graphs", "cache_hits", "cache_misses")})
        print(series, "phases", {k: round(v, 3) for k, v in r.get("phases", {}).items()})
PY
# cProfile: a warm compiled start (caches from the bench), then a fresh one (empty compile cache, warm Triton cache)
timeout 90 python3 -m cProfile -o $OUT/warm.prof -m quickmoe generate /tmp/gpt-oss-20b --compile on --max-tokens 1 \
  -p hi --device cuda --startup-json $OUT/warm_startup.json > $OUT/warm_gen.log 2>&1
echo "warm profile rc $?" >> $S
QUICKMOE_COMPILE_CACHE_DIR=/tmp/cc_fresh TORCHINDUCTOR_CACHE_DIR=/tmp/ind_fresh timeout 120 python3 -m cProfile \
  -o $OUT/fresh.prof -m quickmoe generate /tmp/gpt-oss-20b --compile on --max-tokens 1 -p hi --device cuda \
  --startup-json $OUT/fresh_startup.json > $OUT/fresh_gen.log 2>&1
echo "fresh profile rc $?" >> $S
python3 .ab/prof_summary.py $OUT/warm.prof 70 > $OUT/warm_prof.txt 2>&1
python3 .ab/prof_summary.py $OUT/fresh.prof 70 > $OUT/fresh_prof.txt 2>&1
grep -h "compiled [0-9]* graphs" $OUT/warm_gen.log $OUT/fresh_gen.log | sed 's/.*INFO//' >> $S
unset QUICKMOE_CACHE_DIR
i=0
for run in new keys0 new keys0; do
  i=$((i + 1))
  root=$PWD; [ $run != new ] && root=$PWD/.ab/$run
  QUICKMOE_CACHE_DIR=/tmp/qmc_$run PYTHONPATH=/tmp/site:$root/src timeout 120 python3 -m quickmoe bench coldstart \
    /tmp/gpt-oss-20b -n 3 --device cuda --import-floor > $OUT/coldstart_${i}_$run.txt 2>&1
  echo "coldstart $i $run rc $?" >> $S
  grep -E "^(imports|build|load|process|precompile|capture|weights_ready|total) |import torch" $OUT/coldstart_${i}_$run.txt >> $S
done
cat $S
