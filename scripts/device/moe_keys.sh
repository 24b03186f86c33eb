#!/usr/bin/env bash
# Tune a model's untuned MoE keys on the device and check them in the model, in one call (from the repository root;
# carry .whl and .ab: .ab/main must be `git archive HEAD src tests scripts` of the tree, the files before).
#   PRESET=mixtral-8x7b FMT=bf16 LAYERS=16 TOKENS=1,16,64,256 PROMPTS="64 256" bash scripts/device/moe_keys.sh
# (TOKENS left out: the sizes `scripts/untuned_moe_keys.py --tokens-for PRESET:FMT` lists for this GPU; each T takes
# 10-40 s of tuning, so split a long list over calls)
# 1. `make-checkpoint --preset PRESET --weights FMT --layers LAYERS` in the background (LAYERS: part of the model, so
#    that it fits the 64 GB disk; the MoE's share of a step is a layer's, so a step's ratio carries over);
# 2. `scripts/tune_moe.py --shapes PRESET --format FMT --tokens TOKENS` (a winner is written only where > 2% faster
#    than the pair in use; each key over its range, `--span`; TUNE_ARGS adds options, e.g. "--no-span"), the files
#    into the tree;
# 3. `bench generate --num-prompts N --input-len 1000 --output-len 500` for each N of PROMPTS, the tuned tree and
#    .ab/main in turns, up to 3 rounds, each started before ROUNDS_S seconds (default 420); the decode step's GPU
#    median beside the tok/s.
# The tuned files come back in $OUT/cfg: copy them into src/quickmoe/kernels/configs/ where the model agrees.
set -uo pipefail
source "$(dirname "$0")/env.sh"
trap 'cd "$OUT" && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
: "${PRESET:?set PRESET (a make-checkpoint preset with a tune_moe shape: qwen3-30b-a3b, mixtral-8x7b)}"
FMT=${FMT:-bf16} LAYERS=${LAYERS:-16} PROMPTS=${PROMPTS:-64}
if [ -z "${TOKENS:-}" ]; then  # the sizes scripts/untuned_moe_keys.py lists for this GPU
  device=$(python3 -c "import torch; from quickmoe.kernels.moe_configs import _file_device
print(_file_device(torch.cuda.get_device_name()))")
  TOKENS=$(python3 scripts/untuned_moe_keys.py --devices "$device" --tokens-for "$PRESET:$FMT") || exit 2
  echo "TOKENS=$TOKENS (untuned on $device)"
fi
[ -n "$TOKENS" ] || { echo "nothing untuned for $PRESET $FMT"; exit 0; }
[ -d .ab/main/src ] || { echo ".ab/main/src is missing: carry .ab with the files before in .ab/main"; exit 2; }
M=/tmp/moe-keys-$PRESET-$FMT
rm -rf /tmp/moe-keys-* /tmp/gc-ab-*  # the disk holds 64 GB: the other device scripts' checkpoints go
(timeout 300 python3 -m quickmoe make-checkpoint "$M" --preset "$PRESET" --weights "$FMT" --layers "$LAYERS" -q \
  --overwrite > "$OUT/make.log" 2>&1; echo "checkpoint rc $?" >> "$OUT/make.log") &
mkdir -p "$OUT/cfg" && cp src/quickmoe/kernels/configs/*.json "$OUT/cfg/"
PYTHONPATH=src python3 scripts/tune_moe.py --shapes "$PRESET" --format "$FMT" --tokens "$TOKENS" --out "$OUT/cfg" \
  ${TUNE_ARGS:-} \
  > "$OUT/tune.log" 2>&1
echo "tune rc $? ($SECONDS s)"
grep -o 'T=[0-9]*: gemm1 [0-9.]* us\|gemm2 [0-9.]* us\|in use [0-9. +]*us' "$OUT/tune.log"
changed=$(cd "$OUT/cfg" && for f in *.json; do cmp -s "$f" "$OLDPWD/src/quickmoe/kernels/configs/$f" || echo "$f"; done)
(cd "$OUT/cfg" && rm -f $(ls *.json | grep -vxF "$changed"))  # only the files the tuner changed come back
echo "changed: ${changed:-none}"
[ -n "$changed" ] || { pkill -f "make-checkpoint $M"; exit 0; }  # nothing to check: no checkpoint needed
cp "$OUT"/cfg/*.json src/quickmoe/kernels/configs/
wait; tail -1 "$OUT/make.log"
grep -qx "checkpoint rc 0" "$OUT/make.log" || { echo "no checkpoint: $OUT/make.log"; exit 1; }
run() {  # TREE PROMPTS TAG
  local root=$PWD; [ "$1" = base ] && root=$PWD/.ab/main
  PYTHONPATH=/tmp/site:$root/src timeout 120 python3 -m quickmoe bench generate "$M" --num-prompts "$2" \
    --input-len 1000 --output-len 500 --json "$OUT/gen_$3_$1.json" > "$OUT/gen_$3_$1.log" 2>&1
  local rc=$? step
  step=$(python3 -c "import json; print(round(json.load(open('$OUT/gen_$3_$1.json'))['quickmoe']['steps']['by_kind']\
['decode']['gpu_ms_median'], 3))" 2>/dev/null)
  local tps
  tps=$(grep -A1 'output tok/s' "$OUT/gen_$3_$1.log" | tail -1 | awk '{print $4}')
  echo "$3 $1 rc $rc ($SECONDS s): ${tps:-?} output tok/s, decode step ${step:-?} ms"
}
round=0
while [ "$SECONDS" -lt "${ROUNDS_S:-420}" ] && [ $round -lt 3 ]; do
  round=$((round + 1))
  for n in $PROMPTS; do
    if [ $((round % 2)) = 1 ]; then run new "$n" "${n}_$round"; run base "$n" "${n}_$round"
    else run base "$n" "${n}_$round"; run new "$n" "${n}_$round"; fi
  done
done
