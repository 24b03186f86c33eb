#!/bin/bash
# session 2026-11-29 tenth, call 2: Mixtral NVFP4 at T = 2,048 re-tuned with the scales one step ahead
# (tune_moe.py, tiles of 128 and 256 rows), then bench moe with the tuned file against the committed one, in turns
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
C=src/quickmoe/kernels/configs
mkdir -p $OUT/configs /tmp/committed
cp $C/E8_N28672_K4096_nvfp4_NVIDIA_H200.json $C/E8_N4096_K14336_nvfp4_NVIDIA_H200.json $OUT/configs/
cp $C/E8_N28672_K4096_nvfp4_NVIDIA_H200.json $C/E8_N4096_K14336_nvfp4_NVIDIA_H200.json /tmp/committed/
timeout 330 python3 scripts/tune_moe.py --shapes mixtral-8x7b --format nvfp4 --tokens 2048 --block-m 128,256 \
  --out $OUT/configs > $OUT/tune.txt 2>&1
echo "tune exit $? ($SECONDS s)"; grep -E 'T=|wrote' $OUT/tune.txt | cut -c1-400
bm() {  # files turn [extra]
  [ $SECONDS -gt 520 ] && { echo "skipping bench $1 $2: $SECONDS s gone"; return; }
  if [ $1 = tuned ]; then cp $OUT/configs/*.json $C/; else cp /tmp/committed/*.json $C/; fi
  timeout 100 python3 -m quickmoe bench moe --shapes mixtral-8x7b --formats nvfp4 --tokens 1024,2048,4096 $3 -q \
    --json $OUT/bench_moe_$1_$2.json > $OUT/bench_moe_$1_$2.txt 2>&1
  echo "-- bench moe $1 $2 exit $? ($SECONDS s)"
}
bm tuned a; bm committed a --no-baselines; bm tuned b --no-baselines; bm committed b --no-baselines
for f in $OUT/bench_moe_*.txt; do echo "== $(basename $f)"; grep -E '^mixtral' $f; done
cd $OUT && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz .
