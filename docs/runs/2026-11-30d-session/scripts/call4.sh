#!/bin/bash
# Call 4 (2026-11-30 fourth session, issue 16): warm --compile on starts, 5 in turns per tree, new (work tree: one graph
# for sliding and full layers, no Inductor workers on a warm cache) / base (01b3673): `quickmoe generate --compile on
# --max-tokens 1 --startup-json`, each tree its own compile cache (filled by one untimed start), the Triton cache and
# bytecode shared. Then the default start (no compile), bench coldstart -n 3 new / base.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
S=$OUT/summary.txt
timeout 120 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > $OUT/make.log 2>&1
echo "make rc $?" >> $S
export QUICKMOE_CACHE_DIR=/tmp/qc4
gen() {  # gen TREE FILE
  local root=$PWD; [ $1 != new ] && root=$PWD/.ab/$1
  QUICKMOE_COMPILE_CACHE_DIR=/tmp/cc4_$1 PYTHONPATH=/tmp/site:$root/src timeout 90 python3 -m quickmoe generate \
    /tmp/gpt-oss-20b --compile on --max-tokens 1 -p "Hello world" --temperature 0 --device cuda -q \
    --startup-json $2 > /dev/null 2>> $OUT/gen_errors.log
  echo "$1 $(basename $2) rc $?" >> $OUT/gen_rc.txt
}
mkdir -p $OUT/fill $OUT/runs
gen new $OUT/fill/fill_new_0.json; gen base $OUT/fill/fill_base_0.json
for i in 1 2 3 4 5; do gen new $OUT/runs/s_new_$i.json; gen base $OUT/runs/s_base_$i.json; done
python3 .ab/startup_summary.py $OUT/runs/*.json >> $S 2>&1
grep -c "rc 0" $OUT/gen_rc.txt >> $S
for run in new base; do
  root=$PWD; [ $run != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 3 --device cuda \
    > $OUT/coldstart_$run.txt 2>&1
  echo "coldstart $run rc $?" >> $S
  grep -E "^(imports|load|process|capture|first_token|weights_ready|total) " $OUT/coldstart_$run.txt >> $S
done
cat $S
