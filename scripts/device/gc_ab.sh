#!/usr/bin/env bash
# QUICKMOE_SERVING_GC=normal against =frozen in `bench generate`, in turns, under scripts/probes/gc_pauses.py (from
# the repository root; carry .whl). Each case is PRESET:WEIGHTS:LAYERS:PROMPTS:OUTPUT_LEN (LAYERS 0 = the preset's):
#   CASES="mixtral-8x7b:nvfp4:16:64:500 gpt-oss-20b:mxfp4:0:256:1000" ROUNDS=3 bash scripts/device/gc_ab.sh
# VARIANTS (default "normal frozen"): each a setting, or SETTING@TREE to run the tree in .ab/TREE (carry .ab), e.g.
#   VARIANTS="frozen frozen@main" compares this tree with .ab/main, both frozen.
# A round runs every case with every variant (the order flips each round); a round starts only before ROUNDS_S
# seconds (default 430). Per run: output tok/s, the decode step's GPU median, the GPU idle between steps in total
# (`steps.idle_ms_total`) and the collector's full passes (when, ms, collected).
# PYTEST_K="..." runs that selection (pytest -k) of tests/kernels/test_fused_moe_quantized.py first, while the
# checkpoints are made (e.g. "shipped and qwen3 and bf16": a new tuned table against the float64 reference).
set -uo pipefail
source "$(dirname "$0")/env.sh"
trap 'cd "$OUT" && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
CASES=${CASES:-"mixtral-8x7b:nvfp4:16:64:500 gpt-oss-20b:mxfp4:0:256:1000"}
VARIANTS=${VARIANTS:-normal frozen}
for variant in $VARIANTS; do
  tree=${variant#*@}
  [ "$tree" = "$variant" ] || [ -d ".ab/$tree/src" ] || { echo "$variant: no .ab/$tree/src (carry .ab)"; exit 2; }
done
ckpt() { echo "/tmp/gc-ab-$1-$2-$3"; }
for case in $CASES; do  # the checkpoints, in the background
  IFS=: read -r preset weights layers _ _ <<< "$case"
  M=$(ckpt "$preset" "$weights" "$layers")
  [ -f "$M/config.json" ] && continue
  layer_args=(); [ "$layers" != 0 ] && layer_args=(--layers "$layers")
  (timeout 300 python3 -m quickmoe make-checkpoint "$M" --preset "$preset" --weights "$weights" "${layer_args[@]}" -q \
    --overwrite > "$OUT/make_$preset-$weights.log" 2>&1; echo "checkpoint rc $?" >> "$OUT/make_$preset-$weights.log") &
done
if [ -n "${PYTEST_K:-}" ]; then
  timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_fused_moe_quantized.py \
    -k "$PYTEST_K" > "$OUT/pytest.log" 2>&1
  echo "pytest rc $? ($SECONDS s): $(tail -1 "$OUT/pytest.log")"
fi
wait
ls "$OUT"/make_*.log > /dev/null 2>&1 && tail -qn1 "$OUT"/make_*.log
run() {  # CASE VARIANT TAG
  IFS=: read -r preset weights layers prompts output_len <<< "$1"
  local setting=${2%@*} tree=${2#*@} root=$PWD
  [ "$tree" = "$2" ] || root=$PWD/.ab/$tree
  local name=$OUT/gen_${preset}_${weights}_$3_${2/@/_}
  PYTHONPATH=/tmp/site:$root/src QUICKMOE_SERVING_GC=$setting timeout 150 python3 scripts/probes/gc_pauses.py \
    bench generate \
    "$(ckpt "$preset" "$weights" "$layers")" --num-prompts "$prompts" --input-len 1000 --output-len "$output_len" \
    --json "$name.json" > "$name.log" 2>&1
  local rc=$?
  python3 - "$name" "$rc" "$SECONDS" <<'PY'
import json, re, sys
name, rc, seconds = sys.argv[1:]
tag = name.rsplit("/", 1)[1][4:]
try:
    q = json.load(open(name + ".json"))["quickmoe"]
    decode_ms = q["steps"]["by_kind"]["decode"]["gpu_ms_median"]
    figures = (f"{q['output_tokens_per_s']:8.1f} tok/s, decode {decode_ms:.3f} ms,"
               f" idle total {q['steps']['idle_ms_total']:7.1f} ms")
except (OSError, KeyError, TypeError, ValueError) as e:
    figures = f"no figures ({e})"
passes = re.findall(r"full collector passes[^;]*", open(name + ".log").read())
print(f"{tag:<28} rc {rc} ({seconds} s): {figures}; {passes[-1] if passes else 'no gc line'}")
PY
}
round=0
while [ "$SECONDS" -lt "${ROUNDS_S:-430}" ] && [ $round -lt "${ROUNDS:-3}" ]; do
  round=$((round + 1))
  order=$VARIANTS
  [ $((round % 2)) = 1 ] || order=$(echo "$VARIANTS" | tr ' ' '\n' | tac | tr '\n' ' ')
  for case in $CASES; do
    for variant in $order; do run "$case" "$variant" "r$round"; done
  done
done
