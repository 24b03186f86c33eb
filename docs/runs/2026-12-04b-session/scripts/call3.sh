# Call 3: (a) tests/kernels/test_tune_moe_script.py on CUDA (its pair-in-use test failed in call 2: CPU tensors
# launched on the GPU; now on the GPU where there is one). (b) The RequestChecker's tuple path (d679ff9) against
# 7f02a0c (.ab/main), both frozen, gpt-oss-20b 256 x 1000 -> 1000, two rounds in turns: last session's call 2 measured
# it (18,378, 18,338 against 18,341, 18,270 output tok/s) but its outputs were lost with that session. Prediction as
# then: tok/s within +-1% of 7f02a0c; outside_steps_s <= 0.05 s in both (0.07-0.52 s before the fix).
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_tune_moe_script.py > "$OUT/pytest_tune.log" 2>&1
echo "pytest rc $? ($SECONDS s): $(tail -1 "$OUT/pytest_tune.log")"
VARIANTS="frozen frozen@main" CASES="gpt-oss-20b:mxfp4:0:256:1000" ROUNDS=2 ROUNDS_S=300 \
  timeout 420 bash scripts/device/gc_ab.sh
python3 - <<'PY'
import glob, json, os
for f in sorted(glob.glob(os.environ["OUT"] + "/gen_*.json")):
    q = json.load(open(f))["quickmoe"]
    print(f"{os.path.basename(f)[4:-5]:<34} {q['output_tokens_per_s']:8.1f} tok/s, outside steps "
          f"{q['steps']['outside_steps_s']:.3f} s, idle total {q['steps']['idle_ms_total']:.1f} ms")
PY
