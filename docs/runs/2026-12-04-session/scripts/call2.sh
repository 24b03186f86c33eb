# Call 2 (2026-12-04): (a) the tuple prompts' fast path (this tree, with the RequestChecker fix) against 7f02a0c
# (.ab/main), both frozen, gpt-oss-20b 256 x 1000 -> 1000, two rounds. Prediction: tok/s within +-1% of 7f02a0c
# (call 1: -1.5-3%, outside_steps_s 0.07-0.52 s vs 0.01-0.04 s); outside_steps_s <= 0.05 s in both.
# (b) quickmoe serve (gpt-oss-20b, defaults) at concurrency 128 (1000 -> 256, 384 prompts), in turns:
#   old = 7f02a0c (.ab/main); normal = this tree with QUICKMOE_SERVING_GC=normal; new = this tree's defaults.
# Prediction: ITL p99 normal 5-30 ms above new, old between; ITL medians and tok/s within 1%.
source scripts/device/env.sh
trap 'cp /tmp/serve_var_* "$OUT"/ 2>/dev/null; cd "$OUT" && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q && ln -s /tmp/gpt-oss-20b /tmp/gc-ab-gpt-oss-20b-mxfp4-0
VARIANTS="frozen frozen@main" CASES="gpt-oss-20b:mxfp4:0:256:1000" ROUNDS=2 ROUNDS_S=200 \
  timeout 240 bash scripts/device/gc_ab.sh
python3 - <<'PY'
import glob, json, os
for f in sorted(glob.glob(os.environ["OUT"] + "/gen_*.json")):
    q = json.load(open(f))["quickmoe"]
    print(f"{os.path.basename(f)[4:-5]:<34} {q['output_tokens_per_s']:8.1f} tok/s, outside steps {q['steps']['outside_steps_s']:.3f} s")
PY
SERVE_VARIANT_CONCS="128:384" \
SERVE_VARIANTS="old:main: normal:new:gc-normal new:new: new2:new: normal2:new:gc-normal old2:main:" \
  timeout $((585 - SECONDS)) bash scripts/device/hotpath.sh serve-variants
