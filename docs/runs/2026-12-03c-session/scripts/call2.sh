#!/bin/bash
# Call 2: the work tree (every CUDA graph's logits in one buffer; the precompile's dry steps over the shortest layer
# prefix holding every (kind, kind before) pair; the prompt graphs' steps recorded by the precompile) against main
# at d4305e4 (.ab/base). Carry [".whl", ".ab"].
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
G=/tmp/g20 Q=/tmp/qwen3-fp8
(timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1
 echo "rc $?" >> $OUT/make_g.log) &
(timeout 260 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1
 echo "rc $?" >> $OUT/make_q.log) &
timeout 170 python3 -m pytest -v -p no:cacheprovider -n 4 -rf --tb=short tests/models/test_kernel_precompile.py \
  tests/models/test_cuda_graphs.py tests/models/test_prefill_graphs.py -m gpu > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s): $(tail -1 $OUT/tests.log)"
grep -E "PASSED|FAILED|ERROR" $OUT/tests.log | grep -v "^PASSED\|^FAILED" | sed 's/.*:://' | cut -c1-100
wait; echo "checkpoints: $(tail -1 $OUT/make_g.log) $(tail -1 $OUT/make_q.log) ($SECONDS s)"
summary() {  # precompile report, slowest capture warm-up (decode, prompt), idle work, output tok/s
  python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["startup"]["info"]
p = d.get("precompile", {})
dec = max((c["warmup_s"] for c in d["cuda_graphs"]["captures"]), default=0)
pre = max((c["warmup_s"] for c in d.get("prefill_graphs", {}).get("captures", [])), default=0)
print({k: p.get(k) for k in ("kernels", "missing", "record_s", "compile_s", "seconds", "dry_layers", "failed")},
      f"max warm-up decode {dec:.3f} prompt {pre:.3f} s")
PY
}
for ck in g q; do
  M=$G; [ $ck = q ] && M=$Q
  for t in base tree; do
    root=$PWD; [ $t = base ] && root=$PWD/.ab/base
    QUICKMOE_CACHE_DIR=/tmp/cache_${ck}_$t PYTHONPATH=/tmp/site:$root/src timeout 150 python3 -m quickmoe bench \
      generate $M --num-prompts 64 --input-len 1000 --output-len 200 --json $OUT/gen_${ck}_$t.json > $OUT/gen_${ck}_$t.log 2>&1
    echo "$ck $t rc $? ($SECONDS s): $(summary $OUT/gen_${ck}_$t.json) | $(grep -A1 'output tok/s' $OUT/gen_${ck}_$t.log | tail -1) | $(grep -o 'before the run.*' $OUT/gen_${ck}_$t.log)"
  done
done
for t in base tree; do  # GPU memory once every graph is captured (the tree's probe on both), steps
  root=$PWD; [ $t = base ] && root=$PWD/.ab/base
  PYTHONPATH=/tmp/site:$root/src timeout 90 python3 scripts/probes/host_step_probe.py $G --batch 1,256 \
    --input-len 200 --steps 20 --no-cprofile > $OUT/decode_$t.log 2>&1
  echo "$t rc $?: $(grep 'GPU memory after' $OUT/decode_$t.log) $(grep -E '^batch [0-9]+:' $OUT/decode_$t.log |
    awk '{printf "%s %s | ", $2, $12}')"
done
echo "($SECONDS s)"
