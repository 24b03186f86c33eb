"""Where quickmoe keeps files it builds once and reuses (vocabulary, tokenizer.json, default model), and how it
opens the files a user hands it (`open_regular`: never blocks on a FIFO or a device).

Every write into the cache goes through `atomic_write_bytes` / `atomic_copy`: the data lands in a
temporary file in the same directory and is renamed into place, so concurrent processes never see a
half-written file (the last writer wins, and all writers write the same bytes).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
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


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class NotARegularFile(OSError):
    """A path that names a directory, FIFO, device or socket where a regular file was expected."""

    def __init__(self, path: str | Path, kind: str) -> None:
        super().__init__(errno.EINVAL, f"not a regular file ({kind})", str(path))

    def __str__(self) -> str:
        return self.strerror


def open_regular(path: str | Path) -> int:
    """A read-only descriptor of the regular file `path` (the caller closes it). The file is opened with
    O_NONBLOCK and checked with fstat before anything is read, so a FIFO or a device never blocks the caller:
    they raise NotARegularFile (an OSError) instead, as a missing or unreadable file raises its OSError."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(path, next((kind for test, kind in _KINDS if test(mode)), "a special file"))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | Path) -> bytes:
    """The bytes of the regular file `path` (OSError, NotARegularFile included, otherwise)."""
    with os.fdopen(open_regular(path), "rb") as f:
        return f.read()


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


def files_stamp(prefix: str, paths, *, inode: bool = False) -> str:
    """sha256 (32 hex digits) of `prefix` and each path's name, size and mtime (ns), and inode with `inode`; a
    missing file counts as one. The check Python's bytecode cache makes: a file replaced or edited changes it."""
    import hashlib

    digest = hashlib.sha256(prefix.encode())
    for path in paths:
        try:
            st = os.stat(path)
            digest.update(f"{path}:{st.st_size}:{st.st_mtime_ns}{f':{st.st_ino}' if inode else ''}\n".encode())
        except OSError:
            digest.update(f"{path}:missing\n".encode())
    return digest.hexdigest()[:32]
