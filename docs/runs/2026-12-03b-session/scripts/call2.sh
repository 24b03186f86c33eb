#!/bin/bash
# Call 2 (2026-12-03 second session): the tree (bf16 logits to the sampler, the alignment's one program for one
# sort chunk only, decode buckets in steps of 16 above 32) against main (.ab/base, 03ba210), and the tree with
# power-of-two buckets (pow2: the first two changes alone); GPU tests of what changed while the checkpoints are
# made; then bench generate 256 x 1000 -> 1000 of gpt-oss-20b, tree and main.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8 G=/tmp/g20
([ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "20b checkpoint ready rc $?" >> $OUT/make_g.log) &
([ -d $Q ] || timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1
 echo "qwen3 checkpoint ready rc $?" >> $OUT/make_q.log) &
timeout 110 python3 -m pytest -q -p no:cacheprovider -n 6 tests/unit/test_sampler.py tests/kernels/test_moe_align.py \
  tests/models/test_cuda_graphs.py tests/models/test_prefill_graphs.py tests/models/test_kernel_warmup.py \
  tests/kernels/test_fused_moe.py -k "gpu or cuda or align or graph or padding or sub_tile or k_parts or ladder or bf16" \
  > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s): $(tail -1 $OUT/tests.log)"; grep -E "^(FAILED|ERROR)" $OUT/tests.log | head
wait; cat $OUT/make_g.log $OUT/make_q.log 2>/dev/null | grep rc; echo "checkpoints ($SECONDS s)"
POW2=1,2,4,8,16,32,64,128,256
run_probe() {  # model tree label [extra]
  local ck=$G; [ $1 = q ] && ck=$Q
  local root=$PWD; [ $2 = base ] && root=$PWD/.ab/base
  [ $SECONDS -gt 470 ] && { echo "skipping $1 $3 ($SECONDS s)"; return; }
  PYTHONPATH=/tmp/site:$root/src timeout 80 python3 scripts/probes/host_step_probe.py $ck --batch 1,48,129,160,256 \
    --input-len 200 --steps 30 --no-cprofile $4 > $OUT/decode_$1_$3.log 2>&1
  echo "$1 $3 rc $? ($SECONDS s)"
  grep -E "^batch [0-9]+:" $OUT/decode_$1_$3.log | awk '{printf "%s %s | ", $2, $12} END {print ""}'
}
run_probe g new new; run_probe g base base; run_probe g new pow2 "--cuda-graph-sizes $POW2"
run_probe g new new2; run_probe g base base2
run_probe q new new; run_probe q base base; run_probe q new pow2 "--cuda-graph-sizes $POW2"
for t in new base; do
  root=$PWD; [ $t = base ] && root=$PWD/.ab/base
  [ $SECONDS -gt 480 ] && { echo "skipping generate $t ($SECONDS s)"; continue; }
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench generate $G --num-prompts 256 --input-len 1000 \
    --output-len 1000 --json $OUT/gen_g_$t.json > $OUT/gen_g_$t.log 2>&1
  echo "generate g $t rc $? ($SECONDS s): $(grep -A1 'output tok/s' $OUT/gen_g_$t.log | tail -1)"
done
echo "($SECONDS s)"
