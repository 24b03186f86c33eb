"""Where quickmoe keeps files it builds once and reuses (vocabulary, tokenizer.json, default model).

Every write into the cache goes through `atomic_write_bytes` / `atomic_copy`: the data lands in a
temporary file in the same directory and is renamed into place, so concurrent processes never see a
half-written file (the last writer wins, and all writers write the same bytes).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

CACHE_DIR_ENV = "QUICKMOE_CACHE_DIR"


def cache_dir() -> Path:
    """The quickmoe cache directory, created if missing.

    $QUICKMOE_CACHE_DIR if set, else $XDG_CACHE_HOME/quickmoe, else ~/.cache/quickmoe.
    """
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        path = Path(override).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
        path = base / "quickmoe"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _temp_file_beside(path: Path) -> tuple[int, Path]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o644)  # mkstemp makes 0600; cache and model files are ordinary readable files
    return fd, Path(tmp)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically: readers see the old file or the whole new one, never a part."""
    fd, tmp = _temp_file_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_copy(src: Path, dst: Path) -> None:
    """Copy the file `src` to `dst` atomically (temporary file beside `dst`, then os.replace)."""
    fd, tmp = _temp_file_beside(dst)
    try:
        with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
            shutil.copyfileobj(inp, out, length=1 << 22)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


write_atomic = atomic_write_bytes  # alias kept for callers written against the earlier name
