"""Triton's source keys of quickmoe's kernels, made the same in every process.

Triton keys a compiled kernel (in memory and in the kernel cache on disk) by, among others, its function's
`cache_key`: a hash of its source, of its callees' keys and of the `tl.constexpr` globals they use. A function
computes it once, at its first need, and takes its callees' globals from what the callees have recorded *by
then* (`DependenciesFinder._update_hash` merges a callee's `used_global_vals` before asking for its key). So a
kernel hashed before its helpers leaves their globals out, one hashed after them puts them in: the key depends on
the order in which the process first hashed its kernels. On the development machine `moe_gemm._gemm2_kernel` got
f7a2... alone and c4ba... after moe_tiles' helpers. Two processes that launch kernels in different orders then
miss each other's kernel cache entries: a warm cache compiles again, and kernels compiled by the precompile's
worker processes (executor/compile_workers.py) were not found by the process that asked for them (15 of 61 on
the H200, 2026-11-30).

`settle_kernel_keys()` imports every kernel module and recomputes every quickmoe kernel's key until none changes
(three passes, ~0.1 s of parsing): the keys then include every global their callees use, whatever the order, in
every process that settles them before its first launch (the runner's Triton start does, and each compile
worker). Beside the weight load that parsing took the load ~0.15 s longer on the H200 (the loader's thread waited
for the interpreter), so the settled keys are kept in quickmoe's cache (`<quickmoe cache>/kernel-keys/<stamp>.json`,
the stamp hashing triton's and Python's versions and the path, size and mtime of every kernel module) and a later
process assigns them without parsing. With each key the store keeps the constexpr globals the function uses (name,
module, value's repr): a key is taken only if every such value is the same in this process (a global computed from
the environment or the device would otherwise get another value under the same key), and Triton's record of them
(`used_global_vals`, which it checks at each launch) is rebuilt from them.
"""

from __future__ import annotations

import importlib
import json
import logging
import pkgutil
import sys
from pathlib import Path

__all__ = ["kernel_keys_stamp", "quickmoe_jit_functions", "settle_kernel_keys"]

logger = logging.getLogger(__name__)

MAX_PASSES = 8


def quickmoe_jit_functions() -> list:
    """Every `@triton.jit` function of quickmoe's modules loaded so far (unwrapping autotune/heuristics)."""
    from triton.runtime.jit import JITFunction

    found, seen = [], set()
    for name, module in list(sys.modules.items()):
        if not name.startswith("quickmoe.") or module is None:
            continue
        for value in list(vars(module).values()):
            while not isinstance(value, JITFunction) and hasattr(value, "fn") and not isinstance(value, type):
                value = value.fn
            if isinstance(value, JITFunction) and id(value) not in seen:
                seen.add(id(value))
                found.append(value)
    return found


def _name(fn) -> str:
    return f"{fn.fn.__module__}.{fn.fn.__qualname__}"


def kernel_keys_stamp(files: list[Path]) -> str:
    """sha256 of triton's and Python's versions and each file's path, size and mtime (ns)."""
    import triton

    from quickmoe.paths import files_stamp

    return files_stamp(f"kernel-keys-1-{triton.__version__}-{sys.version}", sorted(files))


def settle_kernel_keys(store: Path | None = None) -> int:
    """Give every Triton function of quickmoe.kernels (all its modules imported first) its settled key (see the
    module docstring): from the store when it holds this stamp's keys for all of them, else computed and stored.
    `store`: the folder (default `<quickmoe cache>/kernel-keys`). Returns the passes computed (0: from the store)."""
    import quickmoe.kernels as kernels

    files = []
    for info in pkgutil.iter_modules(kernels.__path__):
        if not info.ispkg:
            module = importlib.import_module(f"{kernels.__name__}.{info.name}")
            files.append(Path(module.__file__).resolve())
    functions = quickmoe_jit_functions()
    if store is None:
        from quickmoe.paths import cache_dir

        store = cache_dir() / "kernel-keys"
    path = store / f"{kernel_keys_stamp(files)}.json"
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        stored = None
    records = [_recorded(stored, fn) for fn in functions] if isinstance(stored, dict) else [None]
    if all(r is not None for r in records):
        for fn, (key, used) in zip(functions, records):
            with fn._hash_lock:
                fn.hash, fn.used_global_vals = key, used
        return 0
    passes = _settle(functions)
    table = {_name(fn): _record(fn) for fn in functions}
    try:
        from quickmoe.paths import atomic_write_bytes

        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, json.dumps({k: v for k, v in table.items() if v is not None}).encode())
    except OSError as exc:  # a read-only cache: the next process computes them again
        logger.debug("kernel keys not stored in %s: %s", path, exc)
    return passes


def _record(fn) -> dict | None:
    """What the store keeps of a settled function: its key and, per global it uses, the name, the module and the
    value's repr; None when a global lives outside a module (a closure's), which the store cannot look up."""
    used = []
    for (name, _), (value, scope) in fn.used_global_vals.items():
        module = scope.get("__name__")
        if not isinstance(module, str) or sys.modules.get(module) is None or vars(sys.modules[module]) is not scope:
            return None
        used.append([name, module, repr(value)])
    return {"key": fn.hash, "globals": used}


def _recorded(stored: dict, fn):
    """(key, used_global_vals) of `fn` from the store, or None: not stored, or a global it uses has another value
    in this process than when its key was stored (e.g. one computed from the environment: the key would be wrong)."""
    import copy

    entry = stored.get(_name(fn))
    if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) or not isinstance(entry.get("globals"), list):
        return None
    used = {}
    for name, module, value_repr in entry["globals"]:
        scope = vars(sys.modules[module]) if module in sys.modules else None
        if scope is None or name not in scope or repr(scope[name]) != value_repr:
            return None
        used[(name, id(scope))] = (copy.deepcopy(scope[name]), scope)  # as Triton records them (run-time check)
    return entry["key"], dict(sorted(used.items()))


def _settle(functions: list) -> int:
    """Recompute the functions' keys until none changes; the passes made."""
    for passes in range(1, MAX_PASSES + 1):
        before = [fn.hash for fn in functions]
        for fn in functions:
            with fn._hash_lock:
                fn.hash = None
        for fn in functions:
            fn.cache_key  # noqa: B018 (computes and stores it)
        if [fn.hash for fn in functions] == before:
            return passes
    logger.warning("Triton kernel keys still changed after %d passes", MAX_PASSES)
    return MAX_PASSES
