"""Reading a checkpoint's shards into the OS page cache while the process does other start-up work.

A cold start spends seconds importing torch and creating the CUDA context before the loader reads a
byte; with a cold page cache the disk is then the bottleneck (about 1.6 GB/s on the H100 machine, so
13.8 GB of gpt-oss-20b take 8-9 s). `PageCachePrefetch` starts reading at process start, from a few
threads, in the order the loader will read (file by file, window by window), so that by the time the
loader starts most of the bytes are already in memory and the rest arrive at the disk's full rate.

It costs next to nothing on a warm page cache: each window is first probed with `preadv2(RWF_NOWAIT)`
on its first and last page, which fails with EAGAIN instead of waiting on the disk when a page is not
cached; a window whose probes succeed is skipped without copying. A window that is not resident is read
with plain buffered reads into a small per-thread scratch buffer (the page cache keeps the bytes; the
scratch copy is thrown away). Only `posix_fadvise(WILLNEED)` would avoid that copy, but Linux caps it at
the device's read-ahead size (a few MiB per call), so it does not warm a whole shard.

Competing with the imports for the disk: `import torch` on a cold page cache page-faults its way through
gigabytes of shared libraries; a prefetch at normal I/O priority doubles that time (8.4 s -> 15.9 s on the
H100 machine). So the threads read at the *idle* I/O priority class (Linux `ioprio_set`; the mq-deadline
and BFQ schedulers then dispatch them only while no normal-priority request is pending) until
`raise_priority()` is called once the imports are over; from then on they read at the normal priority,
beside the loader's own reads of the same shards (at idle priority, a prefetch read of a page the loader
is waiting for could be starved by the loader's other reads).

This module imports only the standard library: it must run before `import torch`.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from quickmoe.paths import open_regular

__all__ = ["PageCachePrefetch", "PrefetchStats", "checkpoint_files", "prefetch_page_cache", "set_thread_io_priority"]

logger = logging.getLogger(__name__)

_PAGE = 4096
_SYS_IOPRIO_SET = {"x86_64": 251, "aarch64": 30}.get(platform.machine())
_IOPRIO_WHO_PROCESS = 1  # with who = 0: the calling thread
_IOPRIO_CLASS_SHIFT = 13
IOPRIO_IDLE = 3 << _IOPRIO_CLASS_SHIFT
IOPRIO_NORMAL = 0  # "none": best effort, at the level the CPU nice value gives


def checkpoint_files(model_dir: str | Path) -> list[Path]:
    """The `*.safetensors` files of a checkpoint directory, sorted (cheap: no header is parsed)."""
    return sorted(Path(model_dir).glob("*.safetensors"))


@dataclass(frozen=True)
class PrefetchStats:
    """What a prefetch did: bytes it read from disk into the page cache, bytes it found already cached
    (skipped), files it could not open or read, and the seconds from start to the last window."""

    read_bytes: int
    resident_bytes: int
    failed_files: int
    seconds: float


class PageCachePrefetch:
    """Reads `files` into the page cache from `num_threads` daemon threads, in file order, in windows of
    `window_bytes`; windows already cached are skipped. `stop()` ends it early (e.g. once the loader is done)."""

    def __init__(self, files: Iterable[str | Path], *, num_threads: int = 2, window_bytes: int = 32 << 20,
                 read_bytes: int = 4 << 20, idle_io_priority: bool = True, readahead: bool = True) -> None:
        for option, value in (("num_threads", num_threads), ("window_bytes", window_bytes),
                              ("read_bytes", read_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"PageCachePrefetch option {option!r} = {value!r}: expected a positive integer")
        self.files = [Path(f) for f in files]
        self.num_threads = num_threads
        self.window_bytes = window_bytes
        self.read_bytes = min(read_bytes, window_bytes)
        self.readahead = readahead
        self._windows: list[tuple[int, int, int]] = []  # (file index, offset, nbytes), in file order
        self._fds: list[int | None] = []
        self._lock = threading.Lock()
        self._next = 0
        self._stop = threading.Event()
        self._normal_priority = threading.Event()
        if not idle_io_priority:
            self._normal_priority.set()
        self._read = self._resident = self._failed = 0
        self._threads: list[threading.Thread] = []
        self._t0 = self._t_end = 0.0

    def start(self) -> PageCachePrefetch:
        """Open the files and start the threads; returns at once."""
        self._t0 = time.perf_counter()
        for i, file in enumerate(self.files):
            try:
                fd = open_regular(file)  # a FIFO or a device is refused, never waited on
                size = os.fstat(fd).st_size
            except OSError as exc:
                logger.warning("prefetch: cannot open %s (%s)", file, exc)
                self._fds.append(None)
                self._failed += 1
                continue
            if not self.readahead:
                _no_readahead(fd)
            self._fds.append(fd)
            self._windows += [(i, off, min(self.window_bytes, size - off)) for off in range(0, size, self.window_bytes)]
        for k in range(min(self.num_threads, max(len(self._windows), 1))):
            t = threading.Thread(target=self._run, name=f"quickmoe-prefetch-{k}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def raise_priority(self) -> None:
        """From the next read on, read at the normal I/O priority (call when the imports are over)."""
        self._normal_priority.set()

    def stop(self) -> None:
        """Ask the threads to stop after their current read, wait for them and close the files."""
        self._stop.set()
        self.join()

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every window was read or skipped (or stop() was called); True if finished in time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._threads:
            t.join(None if deadline is None else max(deadline - time.monotonic(), 0.0))
        if any(t.is_alive() for t in self._threads):
            return False
        self._close()
        return True

    def stats(self) -> PrefetchStats:
        with self._lock:
            end = self._t_end or time.perf_counter()
            return PrefetchStats(read_bytes=self._read, resident_bytes=self._resident, failed_files=self._failed,
                                 seconds=end - self._t0 if self._t0 else 0.0)

    # -- threads ------------------------------------------------------------------------------------------

    def _take(self) -> tuple[int, int, int] | None:
        with self._lock:
            if self._stop.is_set() or self._next >= len(self._windows):
                return None
            window = self._windows[self._next]
            self._next += 1
            return window

    def _run(self) -> None:
        scratch = memoryview(bytearray(self.read_bytes))
        idle = not self._normal_priority.is_set() and set_thread_io_priority(IOPRIO_IDLE)
        while (window := self._take()) is not None:
            if idle and self._normal_priority.is_set():
                idle = not set_thread_io_priority(IOPRIO_NORMAL)
            index, offset, nbytes = window
            fd = self._fds[index]
            assert fd is not None  # windows exist only for opened files
            try:
                if _is_resident(fd, offset, nbytes):
                    self._count(resident=nbytes)
                    continue
                done = 0
                while done < nbytes and not self._stop.is_set():
                    n = os.preadv(fd, [scratch[:min(self.read_bytes, nbytes - done)]], offset + done)
                    if n == 0:
                        break
                    done += n
                self._count(read=done)
            except OSError as exc:  # a hint only: the loader reads (and reports) for real
                logger.warning("prefetch: cannot read %s at offset %d (%s)", self.files[index], offset, exc)
        with self._lock:
            self._t_end = max(self._t_end, time.perf_counter())

    def _count(self, *, read: int = 0, resident: int = 0) -> None:
        with self._lock:
            self._read += read
            self._resident += resident

    def _close(self) -> None:
        with self._lock:
            fds, self._fds = self._fds, []
        for fd in fds:
            if fd is not None:
                os.close(fd)


def _no_readahead(fd: int) -> None:
    """No kernel read-ahead on this descriptor: only the prefetch's own reads are in flight, which bounds
    how long an import's page fault can wait behind them."""
    if hasattr(os, "posix_fadvise"):
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        except OSError as exc:
            logger.debug("posix_fadvise(RANDOM) failed: %s", exc)


def set_thread_io_priority(ioprio: int) -> bool:
    """Set the calling thread's I/O priority (Linux ioprio_set); False where that is not possible."""
    if _SYS_IOPRIO_SET is None or os.name != "posix":
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(_SYS_IOPRIO_SET, _IOPRIO_WHO_PROCESS, 0, ioprio) != 0:
        logger.debug("ioprio_set(%#x) failed: %s", ioprio, os.strerror(ctypes.get_errno()))
        return False
    return True


def _is_resident(fd: int, offset: int, nbytes: int) -> bool:
    """Whether the first and last page of [offset, offset + nbytes) are in the page cache (never blocks on
    the disk). Without RWF_NOWAIT (not Linux) every window counts as not resident and is read."""
    nowait = getattr(os, "RWF_NOWAIT", None)
    if nowait is None or not hasattr(os, "preadv"):
        return False
    probe = bytearray(1)
    last_page = max((offset + nbytes - 1) // _PAGE * _PAGE, offset)
    for at in dict.fromkeys((offset, last_page)):
        try:
            os.preadv(fd, [probe], at, nowait)
        except BlockingIOError:
            return False
        except OSError:  # RWF_NOWAIT unsupported by this file system: read the window
            return False
    return True


def prefetch_page_cache(paths: Iterable[str | Path], *, num_threads: int = 2) -> PageCachePrefetch:
    """Start reading `paths` into the page cache in daemon threads; returns the started prefetch."""
    return PageCachePrefetch(paths, num_threads=num_threads).start()
