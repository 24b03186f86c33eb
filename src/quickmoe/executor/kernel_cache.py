"""The persistent cache of compiled Triton kernels: quickmoe's own, and those Inductor generates with `--compile on`.

`<quickmoe cache>/triton/<key>` with key = sha256 of the quickmoe, torch and triton versions and the device name,
set as TRITON_CACHE_DIR by `use_triton_cache` before the process compiles its first Triton kernel (the runner calls
it right after CUDA init; nothing launches a kernel before). Triton keys each entry by the kernel's source,
constants and target, so one directory serves every model; the key keeps other versions and devices apart, so a
cache directory can be built once and shipped with an image or a volume. A warm cache means no Triton kernel (nor
its launcher, nor Triton's driver utilities, all C compiled the first time) is compiled at start-up.

A TRITON_CACHE_DIR set by the user wins: it is left as it is (reported as the user's). Calling again is harmless:
the value this module set is recognised as its own. `KernelCache.new_entries()` counts the entries added since
(each compiled kernel, launcher or utility module is one directory), which the StartupReport shows.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from quickmoe.executor.triton_key import use_cached_triton_key
from quickmoe.paths import cache_dir

__all__ = ["KernelCache", "cache_key", "device_name", "triton_cache_dir", "use_triton_cache", "versions"]

logger = logging.getLogger(__name__)

TRITON_CACHE_ENV = "TRITON_CACHE_DIR"
_set_by_us: str | None = None  # the TRITON_CACHE_DIR value use_triton_cache set in this process


def _triton_version() -> str:
    try:
        import triton  # imported already wherever quickmoe's kernels are (importlib.metadata would scan sys.path)
    except ImportError:
        return "none"
    return triton.__version__


def versions() -> dict[str, str]:
    """The versions a compiled kernel depends on: quickmoe's, torch's and triton's."""
    from quickmoe import __version__

    return {"quickmoe": __version__, "torch": torch.__version__, "triton": _triton_version()}


def device_name(device: torch.device) -> str:
    """'NVIDIA H100 80GB HBM3' for a CUDA device, 'cpu' otherwise."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def cache_key(what: dict) -> str:
    """A short stable hash of a JSON-serialisable description."""
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:24]


def triton_cache_dir(device: torch.device) -> Path:
    """`<quickmoe cache>/triton/<key>`, the key hashing versions() and the device name."""
    return cache_dir() / "triton" / cache_key({**versions(), "device": device_name(device)})


def count_entries(path: Path) -> int:
    """Entries (directories) of a Triton cache; 0 if it does not exist."""
    try:
        with os.scandir(path) as entries:
            return sum(1 for e in entries if e.is_dir() and not e.name.startswith("tmp."))
    except FileNotFoundError:
        return 0


@dataclass
class KernelCache:
    """The Triton cache directory in use: `source` "quickmoe" (set by use_triton_cache) or "user" (TRITON_CACHE_DIR
    set before quickmoe ran); `entries` were there when it was chosen. `info` is the report's view."""

    path: Path
    source: str
    entries: int
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.info.update(dir=str(self.path), source=self.source, entries=self.entries)

    def new_entries(self) -> int:
        """Entries added since the cache was chosen: kernels, launchers or utilities compiled by this process (or
        by another one sharing the directory)."""
        return count_entries(self.path) - self.entries

    def record(self, label: str) -> int:
        """Note new_entries() in `info` as `new_entries_<label>` (e.g. "startup", "first_token"); returns it."""
        count = self.info[f"new_entries_{label}"] = self.new_entries()
        return count


def use_triton_cache(device: torch.device) -> KernelCache:
    """Point Triton's cache at triton_cache_dir(device), unless the user's environment sets TRITON_CACHE_DIR."""
    global _set_by_us
    current = os.environ.get(TRITON_CACHE_ENV)
    if current and current != _set_by_us:
        path, source = Path(current), "user"
    else:
        path, source = triton_cache_dir(device), "quickmoe"
        path.mkdir(parents=True, exist_ok=True)
        os.environ[TRITON_CACHE_ENV] = _set_by_us = str(path)
    cache = KernelCache(path=path, source=source, entries=count_entries(path))
    cache.info["triton_key"] = use_cached_triton_key()  # Triton's own version key, from quickmoe's cache
    logger.debug("Triton kernel cache: %s (%s, %d entries; version key %s)", path, source, cache.entries,
                 cache.info["triton_key"])
    return cache
