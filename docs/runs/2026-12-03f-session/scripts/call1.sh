#!/bin/bash
# Call 1: the MoE warm-up ladder's change (7277633, 5509587: the first T of each tuned key joins the ladder) on the
# GPU. (a) its GPU tests and the precompile's with the work tree; (b) the new GPU test against the tree before the
# change (.ab/base = 1e250de; its line asserting 81 in the ladder dropped): it must fail; (c) the ladder's idle work
# for gpt-oss-20b, timed, with an empty and then a warm kernel cache, new and base; then prefills whose T reads a
# key no power of two reads (scripts/idle_probe.py); the same for Qwen3-30B-A3B FP8 (48 layers), fresh caches; (d) serve's /health from outside (serve_probe -n 1 a tree), in turns.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
S=docs/runs/2026-12-03f-session/scripts
C=/tmp/gpt-oss-20b
Q=/tmp/qwen3-fp8
(python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q --overwrite > $OUT/make_q.log 2>&1
 echo "qwen3 ready rc $?" >> $OUT/make_q.log) &
([ -f $C/config.json ] || python3 -m quickmoe make-checkpoint $C --preset gpt-oss-20b -q > $OUT/make_20b.log 2>&1
 echo "20b ready rc $?" >> $OUT/make_20b.log) &
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_kernel_warmup.py \
  tests/models/test_kernel_precompile.py tests/unit/test_triton_start.py > $OUT/tests_new.log 2>&1
echo "tests new rc $? ($SECONDS s): $(tail -1 $OUT/tests_new.log)"
grep -v "assert 81 in" tests/models/test_kernel_warmup.py > .ab/base/tests/models/test_kernel_warmup_new.py
(cd .ab/base && PYTHONPATH=/tmp/site:$PWD/src timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/models/test_kernel_warmup_new.py -k tuned_key > $OUT/tests_base.log 2>&1
 echo "test on base rc $? ($SECONDS s): $(grep -m1 'compiled a MoE' $OUT/tests_base.log | cut -c1-150); $(tail -1 $OUT/tests_base.log)")
wait; cat $OUT/make_20b.log; echo "($SECONDS s)"
for cache in fresh warm; do
  for tree in new base; do
    root=$PWD; [ $tree = base ] && root=$PWD/.ab/base
    dir=/tmp/qmc_idle_$tree; [ $cache = fresh ] && rm -rf $dir
    QUICKMOE_CACHE_DIR=$dir PYTHONPATH=/tmp/site:$root/src timeout 150 python3 $S/idle_probe.py $C 81,100,112,200,700 \
      > $OUT/idle_${cache}_$tree.log 2>&1
    echo "idle $cache $tree rc $? ($SECONDS s): $(tail -1 $OUT/idle_${cache}_$tree.log | cut -c1-400)"
  done
done
wait; cat $OUT/make_q.log
for tree in new base; do  # Qwen3 FP8 (H200 keys 12, 65, 96: T = 11, 81-112 read no power of two's key)
  [ $SECONDS -lt 420 ] || break
  root=$PWD; [ $tree = base ] && root=$PWD/.ab/base
  rm -rf /tmp/qmc_q_$tree
  QUICKMOE_CACHE_DIR=/tmp/qmc_q_$tree PYTHONPATH=/tmp/site:$root/src timeout 100 python3 $S/idle_probe.py $Q \
    11,81,100,112,200 > $OUT/idle_q_$tree.log 2>&1
  echo "idle qwen3 fresh $tree rc $? ($SECONDS s): $(tail -1 $OUT/idle_q_$tree.log | cut -c1-400)"
done
for turn in 1; do
  for tree in new base; do
    root=$PWD; [ $tree = base ] && root=$PWD/.ab/base
    QUICKMOE_CACHE_DIR=/tmp/qmc_idle_$tree PYTHONPATH=/tmp/site:$root/src timeout 90 python3 \
      scripts/probes/serve_probe.py -n 1 --json $OUT/serve_${tree}_$turn.json -- $C > $OUT/serve_${tree}_$turn.txt 2>&1
    echo "serve $tree $turn rc $? ($SECONDS s): $(tail -1 $OUT/serve_${tree}_$turn.txt)"
  done
done
