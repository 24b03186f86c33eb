#!/bin/bash
# Call 2 (2026-12-02 fourth session): the decode attention quantizing its output for Qwen3 FP8's o_proj (the tree)
# against the qk-norm commit (5f58662, .ab/qk). The attention kernel tests and the families' GPU tests on CUDA,
# then bench generate in turns on Qwen3-30B-A3B FP8 (16 x 1000 -> 128, --json: op families), three rounds.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8
(timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1;
 echo "qwen3 checkpoint rc $?" >> $OUT/make_q.log) &
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 6 tests/kernels/test_attention_kernels.py \
  -k "rotary or normalises or qk_norm or bf16 or fp8" > $OUT/test_attention.log 2>&1
echo "attention tests rc $? ($SECONDS s): $(tail -1 $OUT/test_attention.log)"
grep -E "^(FAILED|ERROR)" $OUT/test_attention.log | head
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 4 -m gpu tests/models/test_parity_families.py \
  > $OUT/test_models.log 2>&1
echo "model tests rc $? ($SECONDS s): $(tail -1 $OUT/test_models.log)"; grep -E "^(FAILED|ERROR)" $OUT/test_models.log | head
wait; grep rc $OUT/make_q.log
for round in 1 2 3; do
  for t in qk new; do
    root=$PWD; [ $t != new ] && root=$PWD/.ab/$t
    PYTHONPATH=/tmp/site:$root/src timeout 75 python3 -m quickmoe bench generate $Q \
      --num-prompts 16 --input-len 1000 --output-len 128 --json $OUT/gen_q_r${round}_$t.json \
      > $OUT/gen_q_r${round}_$t.log 2>&1
    echo "round $round $t rc $? ($SECONDS s)"
    grep -E "^quickmoe |decode at batch 1: median|decode step at batch (1|16) by" $OUT/gen_q_r${round}_$t.log | cut -c1-300
  done
done
echo "($SECONDS s)"
