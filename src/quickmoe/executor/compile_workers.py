"""Triton kernels compiled in worker processes, side by side, into the shared kernel cache.

A kernel request is what Triton's JIT would compile at a launch: the `@triton.jit` function (its module and name),
its specialization (argument types, constexprs, alignment attributes) and its options, serialized by Triton
itself as "specialization data" (`triton.runtime.jit.serialize_specialization_data`, the form its own
`JITFunction.preload` reads back). A worker process rebuilds the request, compiles it with `triton.compile` for the
given target (the same call the JIT makes: the same cache key) and builds its launcher, so both land in the
kernel cache directory the workers share with the process that asked (TRITON_CACHE_DIR, inherited). The asking
process's later launch of the same specialization then loads them from the cache (a few ms) instead of compiling
(about a second each, with the GIL held for most of it: threads do not compile side by side, processes do).

This module is the worker's side too: `python -m quickmoe.executor.compile_workers` reads one JSON request a line
on stdin and answers one JSON line on stdout (`_serve`); `executor/compile_pool.py` starts and feeds such workers.
A worker needs no GPU: compiling for a target is host work (LLVM and ptxas); only the launcher's build looks for the
CUDA driver library to link against.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import os
import sys
import time

__all__ = ["CompileResult", "KernelRequest", "cache_entry", "compile_request", "is_cached", "rebuild"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class KernelRequest:
    """One specialization of a `@triton.jit` function to compile: `module`.`qualname` names the function,
    `fn_key` is its source hash (Triton's `cache_key`; a worker checks it resolved the same source), `spec`
    Triton's specialization data (JSON) and `target` the (backend, arch, warp size) to compile for."""

    module: str
    qualname: str
    fn_key: str
    spec: str
    target: tuple[str, int | str, int]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, line: str) -> KernelRequest:
        data = json.loads(line)
        return cls(**{**data, "target": tuple(data["target"])})


@dataclasses.dataclass(frozen=True)
class CompileResult:
    """A worker's answer: `seconds` spent, `cached` when the kernel was in the cache already, `error` (the
    exception's type and message) when it could not be compiled: the launch then compiles it as before."""

    request: KernelRequest
    seconds: float
    cached: bool
    error: str | None = None
    launcher_error: str | None = None  # the kernel compiled, its launcher did not (built at the first launch then)


def _resolve(request: KernelRequest):
    """The JITFunction `request` names (unwrapping `triton.autotune`/`heuristics` wrappers)."""
    from triton.runtime.jit import JITFunction

    obj = importlib.import_module(request.module)
    for part in request.qualname.split("."):
        obj = getattr(obj, part)
    while not isinstance(obj, JITFunction) and hasattr(obj, "fn"):
        obj = obj.fn
    if not isinstance(obj, JITFunction):
        raise TypeError(f"{request.module}.{request.qualname} is a {type(obj).__name__}, not a Triton JIT function")
    if obj.cache_key != request.fn_key:
        raise ValueError(f"{request.module}.{request.qualname}: its source differs from the one asked for")
    return obj


def rebuild(request: KernelRequest):
    """(source, options, backend, target) of `request`, read back as `JITFunction.preload` reads Triton's
    specialization data, for an explicit target instead of the current device's."""
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend

    fn = _resolve(request)
    data = json.loads(request.spec)
    constexprs = {
        tuple(key): tl.dtype(value) if tl.dtype.is_dtype(value)
        else tl.constexpr(value["constexpr"]) if isinstance(value, dict) and "constexpr" in value else value
        for key, value in zip(data["constant_keys"], data["constant_vals"])}
    attrs = {tuple(key): value for key, value in zip(data["attrs_keys"], data["attrs_vals"])}
    # JSON turns tuples into lists; a kernel signature never holds a list, so every list was a tuple
    signature = {key: _tuples(value) for key, value in data["signature"].items()}
    target = GPUTarget(*request.target)
    backend = make_backend(target)
    options = backend.parse_options({k: tuple(v) if isinstance(v, list) else v for k, v in data["options"].items()})
    source = ASTSource
    if fn.is_gluon():  # a Gluon kernel (kernels/moe_gemm_register.py) builds from its own source class
        from triton.experimental.gluon._runtime import GluonASTSource as source
    return source(fn, signature, constexprs, attrs), options, backend, target


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def cache_entry(request: KernelRequest) -> str:
    """Where Triton's file cache keeps `request`'s compiled kernel, relative to TRITON_CACHE_DIR: the metadata
    file `triton.compile` looks up first, under the same key (`get_cache_manager`'s folder name, computed without
    creating the folder as the manager would)."""
    import hashlib

    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.runtime.cache import _base32, get_cache_key

    src, options, backend, _ = rebuild(request)
    options = backend.parse_options(dict(options.__dict__, **src.parse_options()))
    key = get_cache_key(src, backend, options, env_vars=get_cache_invalidating_env_vars())
    return os.path.join(_base32(hashlib.sha256(key.encode("utf-8")).hexdigest()), f"{src.name[:150]}.json")


def is_cached(request: KernelRequest) -> bool:
    """Whether Triton's file cache holds `request`'s compiled kernel (`cache_entry`); False with another cache
    manager (TRITON_CACHE_MANAGER), whose lookups a worker makes itself."""
    from triton import knobs

    if knobs.cache.manager_class is not None:
        return False
    return os.path.exists(os.path.join(knobs.cache.dir, cache_entry(request)))


def compile_request(request: KernelRequest, *, launcher: bool = True) -> CompileResult:
    """Compile `request` into the kernel cache, then (CUDA targets, `launcher`) build its launcher there too; a
    failure is returned, never raised."""
    started = time.perf_counter()
    try:
        cached = is_cached(request)
        src, options, _, target = rebuild(request)
        from triton.compiler import compile as triton_compile

        kernel = triton_compile(src, target=target, options=options.__dict__)
    except Exception as exc:  # noqa: BLE001 (reported to the asking process, which compiles it itself then)
        return CompileResult(request, time.perf_counter() - started, False, _describe(exc))
    launcher_error = None
    if launcher and target.backend == "cuda":
        try:
            from triton.backends.nvidia.driver import CudaLauncher

            CudaLauncher(kernel.src, kernel.metadata)  # builds (or finds) the launcher module in the cache
        except Exception as exc:  # noqa: BLE001 (e.g. no CUDA driver library here: built at the first launch)
            launcher_error = _describe(exc)
    return CompileResult(request, time.perf_counter() - started, cached, None, launcher_error)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def _serve() -> None:
    """A worker's loop: one request a line on stdin, one answer a line on stdout, until stdin closes."""
    from quickmoe.executor.kernel_keys import settle_kernel_keys
    from quickmoe.executor.triton_key import use_cached_triton_key

    use_cached_triton_key()  # the key every compile hashes: read from quickmoe's cache, not recomputed
    settle_kernel_keys()  # the kernels' source keys as the asking process has them (kernel_keys.py)
    launcher = "--no-launchers" not in sys.argv[1:]
    for line in sys.stdin:
        if not line.strip():
            continue
        result = compile_request(KernelRequest.from_json(line), launcher=launcher)
        sys.stdout.write(json.dumps({"seconds": result.seconds, "cached": result.cached, "error": result.error,
                                     "launcher_error": result.launcher_error}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()
