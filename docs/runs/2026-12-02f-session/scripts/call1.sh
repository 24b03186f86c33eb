#!/bin/bash
# Call 1 (2026-12-02 sixth session): the prefill attention's tile search by slot starts (.ab/slot: main with 1df12e2
# reverted, i.e. branch next/prefill-slot-search's kernel) against main's running sum (.ab/main): the prefill attention
# tests on CUDA for the slot tree, then `bench attention` prefill points in turns, two rounds. Then what a prompt
# graph's padding rows cost: prefill_host_probe.py on gpt-oss-20b at bucket sizes and one token past them.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
G=/tmp/g20
([ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "20b checkpoint ready rc $?" >> $OUT/make_g.log) &
(cd .ab/slot && PYTHONPATH=/tmp/site:$PWD/src timeout 120 python3 -m pytest -q -p no:cacheprovider -n 6 \
  tests/kernels/test_attention_kernels.py -k "prefill" > $OUT/tests_slot.log 2>&1)
echo "slot tests rc $? ($SECONDS s): $(tail -1 $OUT/tests_slot.log)"; grep -E "^(FAILED|ERROR)" $OUT/tests_slot.log | head
for round in 1 2; do
  for t in main slot; do
    PYTHONPATH=/tmp/site:$PWD/.ab/$t/src timeout 60 python3 -m quickmoe bench attention --batches 1 --contexts 1024 \
      --windows 0,128 --prefill 1:1024,4:2048,1:8192,16:512,64:128,8:1000 > $OUT/attn_r${round}_$t.log 2>&1
    echo "attention $t r$round rc $? ($SECONDS s)"
    sed -n '/^prefill (whole/,/^prefill:/p' $OUT/attn_r${round}_$t.log | awk 'NR>2 && NF==8 {printf "%sx%s w%s %s | ", $1,$2,$3,$4} END {print ""}'
  done
done
wait; cat $OUT/make_g.log 2>/dev/null | grep rc
timeout 200 python3 scripts/probes/prefill_host_probe.py $G --lens 256,257,1024,1025,1152,2048 --cprofile-len 0 \
  > $OUT/prefill_pad_g.log 2>&1
echo "probe rc $? ($SECONDS s)"; grep -E "^idle|^prompt-step|^prompt|^  wall" $OUT/prefill_pad_g.log | cut -c1-250
echo "($SECONDS s)"
