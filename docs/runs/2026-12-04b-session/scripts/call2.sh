# Call 2: the GPU tests on the current tree (d679ff9; last whole run 2026-12-03 fourth session at efb43ed, before the
# heap freeze, the prompts as tuples, the detokenizer's joined pieces and the RequestChecker's tuple path).
bash scripts/device/hotpath.sh tests
