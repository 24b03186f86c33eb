# Sourced by the device scripts, from the repository root: installs the carried wheels of
# scripts/device/fetch_wheels.sh (.whl/) and sets the environment every device run uses; $OUT gets made.
OUT=${OUT:-/tmp/quickmoe-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 QUICKMOE_CACHE_DIR=/tmp/quickmoe-cache HF_HUB_OFFLINE=1 OUT
