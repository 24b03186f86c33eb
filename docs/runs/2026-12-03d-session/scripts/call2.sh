# Call 2: the Qwen3 FP8 kernel-count tests on CUDA after 099a2bd (random KV context), the one-off layer probe
# (what the cache held), then scripts/tune_moe.py for Qwen3-30B-A3B FP8 at T = 256 and 128 (keys the files lack:
# those T took key 65, the fallback's middle config, never tuned).
source scripts/device/env.sh 2>/dev/null
trap 'cd $OUT && tar czf all_logs.tgz *.log *.txt cfg 2>/dev/null' EXIT
python3 -m pytest -q -p no:cacheprovider tests/models/test_kernel_count.py -rf > $OUT/kernel_count_tests.log 2>&1
tail -3 $OUT/kernel_count_tests.log
timeout 120 python3 scripts/probes/fp8_layer_debug.py cuda 2>&1 | grep -v INFO | tail -22 > $OUT/layer_debug.txt
tail -4 $OUT/layer_debug.txt
mkdir -p $OUT/cfg && cp src/quickmoe/kernels/configs/E128_N*_K*_fp8_*_H200.json $OUT/cfg/
PYTHONPATH=src timeout 400 python3 scripts/tune_moe.py --shapes qwen3-30b-a3b --format fp8 --tokens 256,128 \
  --out $OUT/cfg 2>&1 | tee $OUT/tune.log | grep -v "skipped"
