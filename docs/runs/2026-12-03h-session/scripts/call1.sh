# Call 1: the tuple change (17eb696, 220d8c0, 571466a) against 7f02a0c (.ab/main), both with the default heap freeze.
# Prediction: gpt-oss-20b 256 x 1000 -> 1000 idle total 91-114 -> 40-70 ms, in-run full passes 19-65 -> a few ms,
# tok/s +0.2-0.5%; Mixtral NVFP4 idle 7-10 ms in both.
VARIANTS="frozen frozen@main" CASES="gpt-oss-20b:mxfp4:0:256:1000 mixtral-8x7b:nvfp4:16:64:500" ROUNDS=3 ROUNDS_S=400 \
  bash scripts/device/gc_ab.sh
