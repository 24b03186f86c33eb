#!/bin/bash
# Call 3: the model and engine GPU tests (hotpath.sh tests, parts "models engine") on a9dbe98's code, then the
# prompt graphs' logits in the decode graphs' buffer (one [max_num_seqs, V] buffer for both): GPU memory after the
# idle work and the decode steps (call 2's tree, two buffers: 117.596 GiB reserved).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
G=/tmp/g20
(timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "rc $?" >> $OUT/make_g.log) &
TESTS_PARTS="models engine" timeout 400 bash scripts/device/hotpath.sh tests
echo "tests done ($SECONDS s)"
wait
timeout 90 python3 scripts/probes/host_step_probe.py $G --batch 1,256 --input-len 200 --steps 20 --no-cprofile \
  > $OUT/decode_tree.log 2>&1
echo "tree rc $? ($SECONDS s): $(grep 'GPU memory after' $OUT/decode_tree.log) $(grep -E '^batch [0-9]+:' \
  $OUT/decode_tree.log | awk '{printf "%s %s | ", $2, $12}')"
