#!/bin/bash
# session 2026-11-29 eleventh, call 7: around the key-256 entries of gpt-oss-20b on the H200 (GEMM 1: 64 rows plain,
# one dot; GEMM 2: 64 x 128 transposed since a037f46): deeper K steps, more stages, launch order; a winner by >= 4%
# alone goes into a copy of the tree (.ab/cand) and is timed in the layer and in bench generate in turns
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
CKPT=/tmp/gpt-oss-20b
python3 -m quickmoe make-checkpoint $CKPT --preset gpt-oss-20b -q > $OUT/make.txt 2>&1 &
S=scripts/probes/moe_config_sweep.py
timeout 100 python3 $S --shape gpt-oss-20b --tokens 256 --block-m 64 --block-n 64 --block-k 64,128 --warps 4 \
  --stages 3,4,5 --swap 0 --group-m 1,8 --one-dot 1 --gemms 1 --top 5 --json $OUT/sweep_g1.json > $OUT/sweep_g1.txt 2>&1
echo "sweep g1 exit $? ($SECONDS s)"; grep -v Warn $OUT/sweep_g1.txt | tail -6
timeout 100 python3 $S --shape gpt-oss-20b --tokens 256 --block-m 64 --block-n 128 --block-n2 128,256 --block-k 64,128 \
  --warps 4 --stages 3,4,5 --swap 1 --group-m 1,8 --gemms 2 --top 5 --json $OUT/sweep_g2.json > $OUT/sweep_g2.txt 2>&1
echo "sweep g2 exit $? ($SECONDS s)"; grep -v Warn $OUT/sweep_g2.txt | tail -6
rm -rf .ab/cand && mkdir -p .ab/cand && cp -r src .ab/cand/
python3 .ab/pick2.py .ab/cand $OUT/sweep_g1.json $OUT/sweep_g2.json > $OUT/pick.txt 2>&1; cat $OUT/pick.txt
wait
if grep -q CHANGED $OUT/pick.txt; then
  for run in cand new cand new; do
    root=$PWD/.ab/$run; [ $run = new ] && root=$PWD
    PYTHONPATH=/tmp/site:$root/src timeout 40 python3 -m quickmoe bench moe --shapes gpt-oss-20b --tokens 256,384 \
      --no-baselines -q > $OUT/bench_moe_${run}_$SECONDS.txt 2>&1
    echo "bench moe $run: $(grep -E '^gpt' $OUT/bench_moe_${run}_*.txt | tail -2 | awk '{print $3, $5}' | tr '\n' ' ') ($SECONDS s)"
  done
  for run in cand new cand new; do
    [ $SECONDS -gt 330 ] && { echo "skip $run"; continue; }
    root=$PWD/.ab/$run; [ $run = new ] && root=$PWD
    PYTHONPATH=/tmp/site:$root/src timeout 60 python3 -m quickmoe bench generate $CKPT --num-prompts 256 --input-len 1000 \
      --output-len 1000 > $OUT/gen_${run}_$SECONDS.txt 2>&1
    f=$(ls -t $OUT/gen_${run}_*.txt | head -1)
    echo "-- $run ($SECONDS s): $(grep -E '^quickmoe ' $f) | $(grep -oE 'decode 999 steps.{0,60}' $f)"
  done
fi
cd $OUT && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz .
