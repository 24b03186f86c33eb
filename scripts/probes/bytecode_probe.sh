#!/usr/bin/env bash
# Does this machine's Python read compiled bytecode (.pyc) for torch and the rest, or compile sources at every
# import? Prints the facts (PYTHONDONTWRITEBYTECODE, pyc counts beside the sources, the file system), then wall
# seconds of fresh processes for three import lines: as configured, and with a bytecode cache of its own
# (PYTHONPYCACHEPREFIX, written by the first run, read by the next ones).
#     bash scripts/probes/bytecode_probe.sh [REPS]     (run after `source scripts/device/env.sh` on the device)
set -u
REPS=${1:-3}
PY=${PYTHON:-python3}
echo "## facts"
env | grep -E '^PYTHON' | sort
$PY - <<'PY'
import importlib.util, os, sys
print("dont_write_bytecode", sys.flags.dont_write_bytecode, "pycache_prefix", sys.pycache_prefix,
      "cache_tag", sys.implementation.cache_tag, "python", sys.version.split()[0])
for name in ("torch", "triton", "fastapi", "pydantic", "numpy", "quickmoe"):
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        print(name, "not found"); continue
    root = os.path.dirname(spec.origin)
    py = pyc = 0
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                py += 1
                pyc += os.path.exists(importlib.util.cache_from_source(os.path.join(d, f)))
    print(f"{name:9s} {root}  .py {py}  with .pyc {pyc}  writable {os.access(root, os.W_OK)}")
PY
df -hT "$($PY -c 'import torch, os; print(os.path.dirname(torch.__file__))')" 2>/dev/null | tail -1
lscpu 2>/dev/null | grep -E 'Model name|^CPU\(s\)' | sed 's/  */ /g'
timeit() {  # runs, label, the python line, then the environment's changes
    local runs=$1 label=$2 line=$3; shift 3
    local ts=()
    for _ in $(seq "$runs"); do
        local t0=$EPOCHREALTIME
        env "$@" "$PY" -c "$line" >/dev/null 2>&1 || echo "FAILED: $label"
        ts+=("$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')")
    done
    printf '%-44s %s\n' "$label" "${ts[*]}"
}
echo "## wall seconds of fresh processes (each run listed)"
PFX=$(mktemp -d)
for spec in "torch|import torch" "torch+triton|import torch, triton.language" \
            "quickmoe|import quickmoe.cli, quickmoe.llm, quickmoe.server.app" \
            "dynamo+inductor|import torch._dynamo, torch._inductor.compile_fx"; do
    label=${spec%%|*}; line=${spec#*|}
    timeit "$REPS" "$label, as configured" "$line"
    timeit 1 "$label, own cache: first (writes)" "$line" PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX="$PFX"
    timeit "$REPS" "$label, own cache: warm" "$line" PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX="$PFX"
done
du -sh "$PFX"
