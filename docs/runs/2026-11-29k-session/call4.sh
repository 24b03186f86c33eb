#!/bin/bash
# session 2026-11-29 eleventh, call 4: gpt-oss-20b MXFP4 at T = 256 (the batch-256 decode step's MoE, ~60% of that
# step): transposed 32- and 64-row tiles and deeper K steps each GEMM alone, beside the committed key 256 (64 rows,
# plain); the fastest pair written into a copy of the tree (.ab/cand) and timed in the layer in turns
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
S=scripts/probes/moe_config_sweep.py
timeout 200 python3 $S --shape gpt-oss-20b --tokens 256 --block-m 32 --block-n 32,64 --block-n2 32,64,128 --block-k 128,256 \
  --warps 2,4 --stages 3,4 --swap 1 --group-m 1 --one-dot 0 --time-tuned --top 6 --json $OUT/sweep32.json > $OUT/sweep32.txt 2>&1
echo "sweep32 exit $? ($SECONDS s)"; grep -v Warn $OUT/sweep32.txt | tail -16
timeout 200 python3 $S --shape gpt-oss-20b --tokens 256 --block-m 64 --block-n 64 --block-n2 64,128 --block-k 64,128 \
  --warps 4,8 --stages 3 --swap 0,1 --group-m 8 --one-dot 0,1 --top 6 --json $OUT/sweep64.json > $OUT/sweep64.txt 2>&1
echo "sweep64 exit $? ($SECONDS s)"; grep -v Warn $OUT/sweep64.txt | tail -16
mkdir -p .ab/cand && cp -r src .ab/cand/
python3 .ab/pick256.py .ab/cand 256 $OUT/sweep32.json $OUT/sweep64.json > $OUT/pick.txt 2>&1; cat $OUT/pick.txt
bm() {  # tree turn
  [ $SECONDS -gt 540 ] && { echo "skipping bench $1 $2: $SECONDS s gone"; return; }
  local root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  PYTHONPATH=/tmp/site:$root/src timeout 60 python3 -m quickmoe bench moe --shapes gpt-oss-20b \
    --tokens 256,384,512 --no-baselines -q --json $OUT/bench_moe_$1_$2.json > $OUT/bench_moe_$1_$2.txt 2>&1
  echo "-- bench moe $1 $2 exit $? ($SECONDS s)"
}
bm cand a; bm new a; bm cand b; bm new b
for f in $OUT/bench_moe_*.txt; do echo "== $(basename $f)"; grep -E '^(shape|gpt)' $f; done
cd $OUT && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz .
