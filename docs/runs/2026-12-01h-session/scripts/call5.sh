#!/bin/bash
# Call 5 (2026-12-01 eighth session): the GPU tests on the work tree (main 9effe88 + the routing tie test):
# hotpath.sh tests (models -m gpu, both kernel parts whole, the engine's float32 equivalences on CUDA).
timeout 560 bash scripts/device/hotpath.sh tests
cd ${OUT:-/tmp/quickmoe-out} && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null
