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
(two passes, ~0.1 s): the keys then include every global their callees use, whatever the order, in every process
that settles them before its first launch (the runner's Triton start does, and each compile worker).
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys

__all__ = ["quickmoe_jit_functions", "settle_kernel_keys"]

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


def settle_kernel_keys() -> int:
    """Import every module of quickmoe.kernels and recompute the source keys of all their Triton functions until
    they no longer change (see the module docstring); returns the number of passes."""
    import quickmoe.kernels as kernels

    for info in pkgutil.iter_modules(kernels.__path__):
        if not info.ispkg:
            importlib.import_module(f"{kernels.__name__}.{info.name}")
    functions = quickmoe_jit_functions()
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
