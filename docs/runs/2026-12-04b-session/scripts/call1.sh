# Call 1 (2026-12-04, second session): does the HTTP frontend's heap freeze (571466a) cost served tok/s?
# Last session's call 2 (outputs lost with that session) ran "new" (this tree's defaults) at 8,558 and 8,529 output
# tok/s against 8,685-8,797 for 7f02a0c and for QUICKMOE_SERVING_GC=normal, at concurrency 128 (1000 -> 256, 384
# prompts). Variants, three rounds in rotating order:
#   new     = this tree (d679ff9) with its defaults (engine and frontend heaps frozen)
#   nofront = this tree with the frontend's freeze switched off (.ab/nofront, nofront.diff); the engine's stays
#   normal  = this tree with QUICKMOE_SERVING_GC=normal (nothing frozen)
# Prediction (the mechanism: a frozen frontend's full passes scan less, nothing else changes): the three within the
# spread of one variant's rounds (about +-1.5%), ITL p99 within +-5 ms. If new trails nofront in all three rounds by
# > 1%, the frontend freeze goes off by default.
source scripts/device/env.sh
trap 'cp /tmp/serve_var_* "$OUT"/ 2>/dev/null; cd "$OUT" && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
SERVE_VARIANT_CONCS="128:384" \
SERVE_VARIANTS="new1:new: nofront1:nofront: normal1:new:gc-normal nofront2:nofront: normal2:new:gc-normal new2:new: \
normal3:new:gc-normal new3:new: nofront3:nofront:" \
  timeout 570 bash scripts/device/hotpath.sh serve-variants
cat "$OUT/serve_variants.txt"
