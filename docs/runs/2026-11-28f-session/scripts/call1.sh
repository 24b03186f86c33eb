#!/bin/bash
# call 1: issue 18 diagnostics (FP8 decode tiles, Mixtral NVFP4/FP8 prefill vs grouped_mm) + issue 16 cold start baseline
source scripts/device/env.sh
O=/tmp/o; mkdir -p $O
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader > $O/gpu.txt
( python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > $O/make20b.log 2>&1; echo made >> $O/make20b.log ) &
maker=$!
echo "== fp8 tiles $(date +%T)"
timeout 200 python3 scripts/probes/fp8_decode_tile_probe.py --tokens 2,16 --json $O/fp8_decode_tiles.json > $O/fp8_decode_tiles.log 2>&1
grep -v "rel err 0\b\|rel err [0-9.]*e-0[3-9]" $O/fp8_decode_tiles.log | grep -v "^\s*$" | tail -30
wait $maker
echo "== bench moe mixtral $(date +%T)"
timeout 240 python3 -m quickmoe bench moe --shapes mixtral-8x7b --formats nvfp4,fp8 --tokens 1024,2048,4096,8192 -q \
  --json $O/moe_mixtral.json > $O/moe_mixtral.txt 2>&1
tail -40 $O/moe_mixtral.txt
echo "== coldstart $(date +%T)"
cat $O/make20b.log | tail -2
for v in default notok default notok; do
  if [ $v = notok ]; then export QUICKMOE_EARLY_TOKENIZER=0; else unset QUICKMOE_EARLY_TOKENIZER; fi
  extra=""; [ $v = default ] && extra="--import-floor"
  python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 3 --device cuda $extra --json $O/cold_$v.json > $O/cold_${v}_$RANDOM.txt 2>&1
done
unset QUICKMOE_EARLY_TOKENIZER
for f in $O/cold_*.txt; do echo "-- $f"; grep -E "imports|load |weights_ready|total|tokenizer|early start|import torch" $f; done
python3 -X importtime -c "import quickmoe.llm" 2> $O/importtime_llm.txt
cd $O && tar czf $OUT/call1.tgz . && cp gpu.txt fp8_decode_tiles.log moe_mixtral.txt $OUT/
