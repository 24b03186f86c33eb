# Call 2: quickmoe serve (gpt-oss-20b, defaults) at concurrency 32 and 128 (1000 -> 256), in turns:
#   old    = 7f02a0c (.ab/main): the engine's heap frozen, the frontend's not, prompts as lists;
#   normal = this tree with QUICKMOE_SERVING_GC=normal (no freeze in either process);
#   new    = this tree's defaults (both processes frozen, prompts as tuples).
# Prediction: ITL p99 at 128: normal 5-30 ms above new, old between; medians and tok/s within 1%.
source scripts/device/env.sh
trap 'cp /tmp/serve_var_* "$OUT"/ 2>/dev/null; cd "$OUT" && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
SERVE_VARIANT_CONCS="32:96 128:384" \
SERVE_VARIANTS="old:main: normal:new:gc-normal new:new: new2:new: normal2:new:gc-normal old2:main:" \
  timeout 570 bash scripts/device/hotpath.sh serve-variants
