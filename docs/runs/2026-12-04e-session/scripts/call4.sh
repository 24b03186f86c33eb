#!/bin/bash
# Call 4 (2026-12-04 fifth session, issue 18): the keys above 256 of Qwen3-30B-A3B's NVFP4 and FP8 tables on the H200.
# Call 3 tuned NVFP4 at T = 128, 256 and 512 (--span). Key 128 kept its pair. At 256 (mean of T = 256 and 384) the
# fallback's 64-row tile won alone (145.0 + 77.5 against 155.2 + 83.4 us) but the 256-sequence decode step was 2.4-3.6%
# slower with it (7.55-7.57 against 7.29-7.39 ms): the 16-row pair in use is the better one at T = 256 itself. At 512
# (mean of 512 and 768) the fallback's tile took 145.7 + 80.9 against 259.5 + 137.4 us: key 128's 16-row tiles, read up
# to T = 576, fall apart past ~300 rows. The work tree now holds call 3's files without key 256: key 128 serves
# T <= 320 as before, the fallback's tile T = 321-768.
# 1. NVFP4, 16 layers: bench generate --max-num-seqs 512, 384 and 512 prompts x 1000 -> 300 (decode steps of 384 and
#    512 sequences), the tree against .ab/main, two rounds in turns.
#    Prediction: the decode step -15 to -25% at 512 sequences, -10 to -20% at 384 (the MoE ~half the step).
# 2. FP8, 16 layers: key 256's 32-row tiles are read up to T = 640. tune_moe.py T = 512 (--span: 512 and 768); if
#    a pair beats the one in use by 2%, the same A/B at 384 and 512 sequences (one round).
#    Prediction: a 64-row tile wins by 10-25% alone at T = 512; the 512-sequence decode step -5 to -10%.
source scripts/device/env.sh
base=$OUT
trap 'cd $base && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
N=/tmp/qwen3-nvfp4-16 F=/tmp/qwen3-fp8-16
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
(timeout 200 python3 -m quickmoe make-checkpoint $N --preset qwen3-30b-a3b --weights nvfp4 --layers 16 -q \
   --overwrite > $OUT/make_n.log 2>&1; echo "nvfp4 rc $?" >> $OUT/make_n.log
 timeout 200 python3 -m quickmoe make-checkpoint $F --preset qwen3-30b-a3b --weights fp8 --layers 16 -q \
   --overwrite > $OUT/make_f.log 2>&1; echo "fp8 rc $?" >> $OUT/make_f.log) &
run() {  # CKPT TAG TREE PROMPTS
  local root=$PWD; [ "$3" = base ] && root=$PWD/.ab/main
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench generate $1 --num-prompts $4 --max-num-seqs 512 \
    --input-len 1000 --output-len 300 --json $OUT/gen_$2_$4_$3.json > $OUT/gen_$2_$4_$3.log 2>&1
  echo "$2 $4 $3 rc $? ($SECONDS s): $(python3 -c "
import json; d = json.load(open('$OUT/gen_$2_$4_$3.json'))['quickmoe']; s = d['steps']['by_kind']
print('tok/s', round(d['output_tokens_per_s'], 1), '; decode', s['decode']['steps'], 'x', round(s['decode']['gpu_ms_median'], 3),
      'ms; batch median', d['steps']['batch_size_median'])" 2>&1 | tail -1)"
}
until grep -q "nvfp4 rc" $OUT/make_n.log 2>/dev/null; do sleep 2; done; tail -1 $OUT/make_n.log
for r in 1 2; do
  for p in 512 384; do
    if [ $r = 1 ]; then run $N n new $p; run $N n base $p; else run $N n base $p; run $N n new $p; fi
  done
done
echo "== nvfp4 A/B done ($SECONDS s)"
mkdir -p $OUT/cfg_fp8 && cp src/quickmoe/kernels/configs/*.json $OUT/cfg_fp8/
PYTHONPATH=src timeout 150 python3 scripts/tune_moe.py --shapes qwen3-30b-a3b --format fp8 --tokens 512 \
  --out $OUT/cfg_fp8 > $OUT/tune_fp8.log 2>&1
echo "tune fp8 rc $? ($SECONDS s)"; grep -E "T=512: gemm1" $OUT/tune_fp8.log | cut -c1-600
changed=$(cd $OUT/cfg_fp8 && for f in *.json; do cmp -s $f $OLDPWD/src/quickmoe/kernels/configs/$f || echo $f; done)
(cd $OUT/cfg_fp8 && rm -f $(ls *.json | grep -vxF "$changed"))
echo "changed: ${changed:-none}"
[ -n "$changed" ] || exit 0
cp $OUT/cfg_fp8/*.json src/quickmoe/kernels/configs/
wait; tail -1 $OUT/make_f.log
for p in 512 384; do
  [ $SECONDS -gt 500 ] && { echo "stop ($SECONDS s)"; break; }
  run $F f new $p; run $F f base $p
done
echo "done ($SECONDS s)"
