#!/bin/bash
# session 2026-11-29 eleventh, call 1: gpt-oss-20b MXFP4 key 1,024 (128 rows, 4 warps, transposed: the loop of the
# unreliable NVFP4 tile) run many times with its 8-warp and plain variants; their speed alone; Qwen3 NVFP4's new
# key 8,192 in the layer against e3e2259 (.ab/base, the old tile), in turns
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
P=scripts/probes/moe_tile_repeat_probe.py
timeout 170 python3 $P --shape gpt-oss-20b --tokens 1024 --runs 30 > $OUT/repeat_1024.txt 2>&1
echo "repeat 1024 exit $? ($SECONDS s)"; grep -v Warn $OUT/repeat_1024.txt | tail -4
timeout 120 python3 $P --shape gpt-oss-20b --tokens 2048 --runs 15 > $OUT/repeat_2048.txt 2>&1
echo "repeat 2048 exit $? ($SECONDS s)"; grep -v Warn $OUT/repeat_2048.txt | tail -4
for t in 1024 2048; do
  timeout 80 python3 scripts/probes/moe_config_sweep.py --shape gpt-oss-20b --tokens $t --block-m 128 --block-n 64 \
    --block-k 64 --warps 4,8 --stages 3 --swap 0,1 --group-m 8 --one-dot 1 --time-tuned > $OUT/sweep_$t.txt 2>&1
  echo "sweep $t exit $? ($SECONDS s)"; grep -v Warn $OUT/sweep_$t.txt | tail -12
done
bm() {  # tree turn
  [ $SECONDS -gt 500 ] && { echo "skipping bench $1 $2: $SECONDS s gone"; return; }
  local root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  PYTHONPATH=/tmp/site:$root/src timeout 90 python3 -m quickmoe bench moe --shapes qwen3-30b-a3b \
    --formats nvfp4 --tokens 4096,8192 --no-baselines -q --json $OUT/bench_moe_$1_$2.json > $OUT/bench_moe_$1_$2.txt 2>&1
  echo "-- bench moe $1 $2 exit $? ($SECONDS s)"
}
bm new a; bm base a; bm new b; bm base b
for f in $OUT/bench_moe_*.txt; do echo "== $(basename $f)"; grep -E '^(shape|qwen3)' $f; done
cd $OUT && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz .
