"""Triton's version key, kept in quickmoe's cache between processes.

Triton keys every compiled kernel by `triton.runtime.cache.triton_key()`: a sha256 of its compiler, backend and
language sources and of `libtriton.so` (416 MB in triton 3.6). A process computes it once, at its first kernel
launch, even when every kernel is in the cache: 0.36 s on the development machine. At start-up that launch is
Triton's start (`executor/triton_start.py`), the thread beside the weight load that processing joins, 0.66-0.72 s
on the H200 (docs/benchmarks.md, 2026-11-29 fifth session), so the hash sits on the way to weights_ready whenever
the load ends first.

`use_cached_triton_key()` puts a function in Triton's place that returns the key from
`<quickmoe cache>/triton-key/<stamp>.txt`. The stamp hashes triton's version and the path, size, mtime and inode of
every file the key reads and of every other file in those directories. An upgraded or reinstalled triton gets a new
stamp. This is how Python's own bytecode cache decides, by size and mtime. On a miss the function computes the key
as Triton does, on whatever thread first asks (Triton's start, as before), and stores it. The key is the same string
either way, so Triton finds the same cache entries. Inductor's copy of the function (`--compile`, which keys its caches
by it too) is replaced as well when Inductor was imported first; imported later, it takes the replacement.

On by default (`QUICKMOE_TRITON_KEY_CACHE=0` turns it off). On the H200 (`scripts/device/coldstart2.sh
start-threads`, docs/benchmarks.md, 2026-11-29 sixth session) Triton's start took 0.086-0.097 s with the stored key
against 0.66-0.69 s without it.
"""

from __future__ import annotations

import logging
import os
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

from quickmoe.errors import ConfigError
from quickmoe.paths import cache_dir, files_stamp

__all__ = ["key_stamp", "use_cached_triton_key"]

logger = logging.getLogger(__name__)

SWITCH = "QUICKMOE_TRITON_KEY_CACHE"
_KEY_DIRS = ("compiler", "backends", "language")  # the packages triton_key walks, under triton/


def _key_files(triton_root: Path, cache_module_file: Path) -> list[Path]:
    """Every file triton_key reads and every other file beside them: runtime/cache.py, libtriton, and all of
    compiler/, backends/ and language/ (a superset of the modules it walks: a stamp that covers more files can only
    be invalidated more often, never less)."""
    ext = sysconfig.get_config_var("EXT_SUFFIX").split(".")[-1]
    files = [cache_module_file, triton_root / "_C" / f"libtriton.{ext}"]
    for name in _KEY_DIRS:
        for folder, dirs, names in os.walk(triton_root / name):
            dirs.sort()
            files += [Path(folder) / n for n in sorted(names) if not n.endswith(".pyc")]
    return files


def key_stamp(version: str, triton_root: Path, cache_module_file: Path) -> str:
    """sha256 of the version and each key file's path, size, mtime (ns) and inode; a missing file counts as one."""
    return files_stamp(f"triton-key-stamp-1-{version}", _key_files(triton_root, cache_module_file), inode=True)


def _cached(original: Callable[[], str], path: Path) -> Callable[[], str]:
    """A stand-in for triton_key: the stored key, else `original()` stored for the next process."""
    known: list[str] = []
    try:
        text = path.read_text(encoding="utf-8")
        if text:
            known.append(text)
    except OSError:
        pass

    def triton_key() -> str:
        if not known:
            key = original()
            known.append(key)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".tmp{os.getpid()}")
                tmp.write_text(key, encoding="utf-8")
                os.replace(tmp, path)  # whole or absent for a concurrent reader
            except OSError as exc:
                logger.debug("could not keep Triton's version key in %s: %s", path, exc)
        return known[0]

    triton_key.cache_hit = bool(known)  # type: ignore[attr-defined]
    return triton_key


def use_cached_triton_key() -> str:
    """Serve triton_key from quickmoe's cache (unless `QUICKMOE_TRITON_KEY_CACHE=0`). Returns what happened: "off",
    "unavailable" (no triton, or a triton_key this does not know), "computed already" (this process has it),
    "cached" (the stored key) or "miss" (computed at first use and stored)."""
    value = os.environ.get(SWITCH, "1")
    if value not in ("0", "1"):
        raise ConfigError(f"{SWITCH}={value!r}: expected '1' (the default: Triton's version key kept in quickmoe's "
                          "cache) or '0' (Triton hashes its sources and libtriton in every process)")
    if value == "0":
        return "off"
    try:
        import triton
        from triton.runtime import cache as triton_cache
    except ImportError:
        return "unavailable"
    original = getattr(triton_cache, "triton_key", None)
    if getattr(original, "quickmoe_cached", False):
        return "cached" if original.cache_hit else "miss"  # installed earlier in this process
    if original is None or not hasattr(original, "cache_info"):  # not the lru_cache'd function this was written for
        return "unavailable"
    if original.cache_info().currsize:
        return "computed already"
    root = Path(triton.__file__).resolve().parent
    stamp = key_stamp(triton.__version__, root, Path(triton_cache.__file__).resolve())
    cached = _cached(original, cache_dir() / "triton-key" / f"{stamp}.txt")
    cached.quickmoe_cached = True  # type: ignore[attr-defined]
    triton_cache.triton_key = cached  # get_cache_key looks the name up in that module at each call
    compat = sys.modules.get("torch._inductor.runtime.triton_compat")  # Inductor's key (--compile) took it by name
    if compat is not None and getattr(compat, "triton_key", None) is original:
        compat.triton_key = cached
    return "cached" if cached.cache_hit else "miss"
