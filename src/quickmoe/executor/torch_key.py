"""torch's source key, kept in quickmoe's cache between processes (`--compile on`).

Inductor and AOTAutograd key their caches by `torch._inductor.codecache.torch_key()`: a sha256 of torch's version and
of every module torch ships (2,285 files, 46 MB in torch 2.13) plus two of Inductor's runtime files. A process
computes it once, at its first compilation, even when every graph is in the cache: 0.12-0.16 s of a warm compile
phase on the development machine (`CompileStats.key_s`, "source hashing" in the compile log).

`use_cached_torch_key()` gives torch the key stored in `<quickmoe cache>/torch-key/<stamp>.txt`. The stamp hashes
torch's version and the path, size, mtime and inode of every .py, .so and .pyd file under torch's directory (a
superset of the modules the key reads) and of Inductor's two extra files, as Python's own bytecode cache decides by
size and mtime; listing them takes 0.02-0.03 s. An upgraded, reinstalled or edited torch gets a new stamp. On a miss
the key is computed as torch computes it and stored. It is the same bytes either way, so Inductor finds the same
cache entries.

On by default (`QUICKMOE_TORCH_KEY_CACHE=0` turns it off). executor/triton_key.py does the same for Triton's key.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
from collections.abc import Callable
from pathlib import Path

from quickmoe.errors import ConfigError
from quickmoe.paths import cache_dir, files_stamp

__all__ = ["torch_key_stamp", "use_cached_torch_key"]

logger = logging.getLogger(__name__)

SWITCH = "QUICKMOE_TORCH_KEY_CACHE"
_MODULE_SUFFIXES = (".py", ".so", ".pyd")
# what torch_key hashes besides the modules, relative to torch/_inductor (torch 2.11-2.13)
_INDUCTOR_EXTRA = ("codegen/aoti_runtime/interface.cpp", "script.ld")


def _stamp_files(torch_root: Path) -> list[Path]:
    """Every module file under torch's directory (sorted walk, bytecode caches skipped) and Inductor's extra files."""
    files = []
    for folder, dirs, names in os.walk(torch_root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        files += [Path(folder) / n for n in sorted(names) if n.endswith(_MODULE_SUFFIXES)]
    return files + [torch_root / "_inductor" / extra for extra in _INDUCTOR_EXTRA]


def torch_key_stamp(version: str, torch_root: Path) -> str:
    """sha256 of torch's version and each stamped file's path, size, mtime (ns) and inode; a missing file counts."""
    return files_stamp(f"torch-key-stamp-1-{version}", _stamp_files(torch_root), inode=True)


def _read(path: Path) -> bytes | None:
    try:
        key = base64.b64decode(path.read_text(encoding="ascii"), validate=True)
    except (OSError, ValueError, binascii.Error):
        return None
    return key or None


def _store(path: Path, key: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(base64.b64encode(key).decode("ascii"), encoding="ascii")
        os.replace(tmp, path)  # whole or absent for a concurrent reader
    except OSError as exc:
        logger.debug("could not keep torch's source key in %s: %s", path, exc)


def _install(original: Callable[[], bytes], key: bytes) -> bool:
    """Fill torch_key's one value through its `set` (torch 2.11 and 2.13). False when this process computed it
    already (nothing to save)."""
    try:
        original.set(key)  # type: ignore[attr-defined]
    except (RuntimeError, AssertionError):  # "already set" (torch 2.13 raises, 2.11 asserts)
        return False
    original.quickmoe_cached = True  # type: ignore[attr-defined]  (a second call in the process: "cached")
    return True


def use_cached_torch_key() -> str:
    """Serve torch_key from quickmoe's cache (unless `QUICKMOE_TORCH_KEY_CACHE=0`). Call it after importing Inductor
    and before the first compilation. Returns what happened: "off", "unavailable" (no torch_key this knows),
    "computed already" (this process has it), "cached" (the stored key) or "miss" (computed now and stored)."""
    value = os.environ.get(SWITCH, "1")
    if value not in ("0", "1"):
        raise ConfigError(f"{SWITCH}={value!r}: expected '1' (the default: torch's source key kept in quickmoe's "
                          "cache) or '0' (Inductor hashes torch's sources in every process)")
    if value == "0":
        return "off"
    import torch
    from torch._inductor import codecache

    original = getattr(codecache, "torch_key", None)
    if not hasattr(original, "set"):  # not the settable cache this was written for
        return "unavailable"
    if getattr(original, "quickmoe_cached", False):
        return "cached"
    stamp = torch_key_stamp(torch.__version__, Path(torch.__file__).resolve().parent)
    path = cache_dir() / "torch-key" / f"{stamp}.txt"
    key = _read(path)
    if key is not None:
        return "cached" if _install(original, key) else "computed already"
    _store(path, original())  # computed as torch computes it (and kept by torch for this process)
    return "miss"
