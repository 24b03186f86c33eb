#!/bin/bash
# Call 1 (2026-11-30 sixteenth session, issue 16): --compile on with warm caches, Dynamo's and Inductor's imports
# inline (the tree's default) or on a thread beside the load with Python's switch interval at 0.2 / 1 / 5 ms
# (5 ms: Python's default, i.e. the fourth session's variant), in turns, fresh processes; then the compile tests.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
timeout 120 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > $OUT/make.log 2>&1
echo "make rc $?" >> $S
run() {  # $1 label, $2 mode, $3 switch ms
  QUICKMOE_COMPILE_IMPORTS=$2 QUICKMOE_COMPILE_IMPORTS_SWITCH_MS=$3 timeout 90 python3 -m quickmoe generate \
    /tmp/gpt-oss-20b --prompt Hello --max-tokens 1 --temperature 0 --device cuda --compile on -q \
    --startup-json $OUT/runs/$1.json > $OUT/runs/$1.log 2>&1
  echo "$1 rc $?" >> $S
}
mkdir -p $OUT/runs
run w0_inline_fill inline 0.2   # untimed: kernel and compile caches filled
run w1_inline_fill inline 0.2
for round in 1 2 3 4 5; do
  for m in thread02 inline thread5 thread1; do
    case $m in
      inline) run r${round}_inline inline 0.2 ;;
      thread02) run r${round}_thread02 thread 0.2 ;;
      thread1) run r${round}_thread1 thread 1 ;;
      thread5) run r${round}_thread5 thread 5 ;;
    esac
  done
done
python3 .ab/p/start_summary.py $OUT/runs/r*.json > $OUT/start_summary.txt 2>&1
QUICKMOE_COMPILE_IMPORTS=thread timeout 240 python3 -m pytest -q -m gpu tests/models/test_compile.py \
  tests/models/test_compiler_imports.py -p no:cacheprovider > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc $?" >> $S; tail -3 $OUT/gpu_tests.log >> $S
cat $S | tail -8; cat $OUT/start_summary.txt | tail -6
