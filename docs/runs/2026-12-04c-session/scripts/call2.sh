#!/bin/bash
# Call 2 (2026-12-04 third session, issue 18). Call 1 showed the FP8 prefill tiles at 168 registers already (3
# programs an SM) with weights by TMA; the cap helped GEMM 2 only (T = 8,192 341 -> 327 us alone).
# Reading, from the figures: Qwen3's GEMM 1 tile (64 rows x 128 weight rows, K step 128) reads 24 KB from L2 per
# 1 M multiply-adds; at 570 us that is ~8.3 TB/s of L2 -> SM traffic, GEMM 2 ~6.9 TB/s. Prediction: Nsight Compute
# puts both GEMMs' L2 throughput at >= 75% of peak and the tensor pipe under 50%; cuBLAS's FP8 GEMM of the same
# shape (T x k rows) well under that L2 share and its tensor pipe higher.
# 1. ncu: one fused_moe call (Qwen3 FP8, T = 8,192) and torch._scaled_mm of each GEMM's dense shape;
# 2. the GPU test of the FP8 prefill tiles under a cap (work tree);
# 3. bench moe FP8 Qwen3: .ab/cap2 (GEMM 2's keys 2,048 and 8,192 at 168 registers: what would ship) against
#    .ab/main, in turns, three rounds.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
MAIN=/tmp/site:$PWD/.ab/main/src
CAP=/tmp/site:$PWD/.ab/cap2/src
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
PYTHONPATH=$MAIN timeout 200 ncu --clock-control none --profile-from-start off --kernel-name regex:'gemm|sm90|cutlass' \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
  --section LaunchStats \
  --metrics "lts__t_bytes.sum,dram__bytes_read.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sectors_srcunit_tex.sum,smsp__inst_executed.sum,sm__cycles_elapsed.avg,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
  python3 scripts/probes/moe_ncu_probe.py --tokens 8192 --reference > $OUT/ncu_t8192.txt 2>&1
echo "ncu rc $? ($SECONDS s)"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe.py \
  -k "register_cap_gives_the_uncapped_bits_fp8_prefill" > $OUT/gpu_tests.log 2>&1
echo "gpu tests: $(tail -1 $OUT/gpu_tests.log) ($SECONDS s)"
for round in 1 2 3; do
  for tree in cap2 main; do
    P=$MAIN; [ $tree = cap2 ] && P=$CAP
    PYTHONPATH=$P timeout 100 python3 -m quickmoe bench moe --shapes qwen3-30b-a3b --formats fp8 \
      --tokens 1024,2048,4096,8192 --no-baselines -q --json $OUT/moe_${tree}_r$round.json \
      > $OUT/moe_${tree}_r$round.log 2>&1
    echo "bench moe $tree round $round rc $? ($SECONDS s)"
  done
done
python3 - <<'PY'
import json, glob, os, collections
out = os.environ["OUT"]
rows = collections.defaultdict(dict)
for path in sorted(glob.glob(f"{out}/moe_*_r*.json")):
    tree, rnd = os.path.basename(path)[4:-5].split("_")
    data = json.load(open(path))
    fp8 = data["ceilings"].get("fp8_tflops", 0)
    for r in data["rows"]:
        rows[r["tokens"]][f"{tree}_{rnd}"] = (r["quickmoe_graph_s"] * 1e6, r["tflops"] / fp8 * 100 if fp8 else 0)
    print(os.path.basename(path), {k: round(v) for k, v in data["ceilings"].items()})
for t in sorted(rows):
    print(f"T={t:<5d} " + " ".join(f"{n} {us:7.1f} {pct:4.1f}%" for n, (us, pct) in sorted(rows[t].items())))
PY
grep -E "^  [_a-zA-Z].*\(|Duration|L2 Cache Throughput|DRAM Throughput|Compute \(SM\) Throughput|Memory Throughput|lts__t_bytes|dram__bytes|gmma|Registers Per|Achieved Occupancy|Theoretical Occupancy|inst_executed|cycles_elapsed|L1/TEX Hit|L2 Hit|stalled_(long|barrier|wait|math|lg|short|mio|not_sel|dispatch|no_inst|sleeping|membar|tex|drain|branch|selected)" \
  $OUT/ncu_t8192.txt | head -120
echo "($SECONDS s)"
