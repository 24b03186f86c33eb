#!/usr/bin/env bash
# Tuning only, on the device machine: scripts/device/moe_tune.sh SHAPE:TOKENS [SHAPE:TOKENS ...]
# e.g. gpt-oss-20b:1024,4096 gpt-oss-120b:8192; configs merged into $OUT/configs (copy them back after the call: the
# device returns 8 files a call). TUNE_ARGS passes options, e.g. "--format nvfp4" or "--grid full" (the grid the gpt-oss
# files were tuned with; the default small grid fits several T in a call). A rank's experts at tensor parallel 2 are
# the shapes gpt-oss-20b-tp2 and gpt-oss-120b-tp2 (their gate_up and down files are their own since the files name
# the projection).
set -uo pipefail
source "$(dirname "$0")/env.sh"
mkdir -p "$OUT/configs"
cp src/quickmoe/kernels/configs/*.json "$OUT/configs/" 2>/dev/null
for job in "$@"; do
  python3 scripts/tune_moe.py --shapes "${job%%:*}" --tokens "${job#*:}" ${TUNE_ARGS:-} --out "$OUT/configs" 2>&1 | tee -a "$OUT/tune.txt" | grep -v skipped
done
