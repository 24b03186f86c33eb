#!/bin/bash
# For the next session (not run yet): the two diffs of the 2026-12-03 second session measured in one call.
# Build their trees first on the development machine (carry .ab):
#   for d in shared_graph_logits precompile_layer_prefix; do rm -rf .ab/$d; mkdir -p .ab/$d
#     git archive HEAD src tests scripts | tar -x -C .ab/$d; rm -f .ab/$d/src/quickmoe/checkpoint/embedded/*.safetensors
#     (cd .ab/$d && git apply --include='src/*' --include='tests/*' --include='scripts/*' \
#       ../../docs/runs/2026-12-03b-session/$d.diff); done
# Then: bash docs/runs/2026-12-03b-session/scripts/next_diffs.sh (carry [".whl", ".ab"]).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
G=/tmp/g20
([ -d $G ] || timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "20b checkpoint ready rc $?" >> $OUT/make_g.log) &
for d in shared_graph_logits precompile_layer_prefix; do  # each diff's GPU tests on its tree
  (cd .ab/$d && PYTHONPATH=/tmp/site:$PWD/src timeout 100 python3 -m pytest -q -p no:cacheprovider -n 4 -rf \
    tests/models/test_cuda_graphs.py tests/models/test_prefill_graphs.py \
    $( [ $d = precompile_layer_prefix ] && echo tests/models/test_kernel_precompile.py ) -m gpu > $OUT/tests_$d.log 2>&1
   [ $d = precompile_layer_prefix ] && PYTHONPATH=/tmp/site:$PWD/src timeout 60 python3 -m pytest -q \
     -p no:cacheprovider tests/models/test_dry_layers.py >> $OUT/tests_$d.log 2>&1)
  echo "tests $d rc $? ($SECONDS s): $(tail -1 $OUT/tests_$d.log)"
done
wait; grep rc $OUT/make_g.log
# the shared logits: GPU memory after every graph is captured (host_step_probe prints it), tree against the diff
for t in tree shared_graph_logits; do
  root=$PWD; [ $t != tree ] && root=$PWD/.ab/$t
  PYTHONPATH=/tmp/site:$root/src timeout 80 python3 .ab/shared_graph_logits/scripts/probes/host_step_probe.py $G \
    --batch 1,129,256 \
    --input-len 200 --steps 30 --no-cprofile > $OUT/decode_$t.log 2>&1
  echo "$t rc $?: $(grep 'GPU memory after' $OUT/decode_$t.log) $(grep -E '^batch [0-9]+:' $OUT/decode_$t.log |
    awk '{printf "%s %s | ", $2, $12}')"
done
# the layer prefix: a start on an empty kernel cache each, same kernels recorded, record_s down, no compile later
for t in tree precompile_layer_prefix; do
  root=$PWD; [ $t != tree ] && root=$PWD/.ab/$t
  QUICKMOE_CACHE_DIR=/tmp/cache_$t PYTHONPATH=/tmp/site:$root/src timeout 120 python3 -m quickmoe bench generate $G \
    --num-prompts 64 --input-len 1000 --output-len 200 --json $OUT/gen_$t.json > $OUT/gen_$t.log 2>&1
  echo "$t rc $?: $(python3 -c "import json; d = json.load(open('$OUT/gen_$t.json'))['startup']['info']
print(d['precompile'], max(c['warmup_s'] for c in d['cuda_graphs']['captures']))")"
done
echo "($SECONDS s)"
