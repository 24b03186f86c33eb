"""Warming the page cache with a checkpoint's files while the process does other start-up work.

`prefetch_page_cache(paths)` asks the kernel (`posix_fadvise(..., POSIX_FADV_WILLNEED)`) to start reading
every file into the page cache, from a background thread (the call can block while the kernel queues the
reads), and returns at once. A process calls it first thing (before `import torch`, CUDA init and model
build, which take seconds) so that the loader later reads from memory instead of a cold disk. It is a
hint: where the platform lacks posix_fadvise, or a file cannot be opened, it logs and does nothing.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path

__all__ = ["prefetch_page_cache", "checkpoint_files"]

logger = logging.getLogger(__name__)


def checkpoint_files(model_dir: str | Path) -> list[Path]:
    """The `*.safetensors` files of a checkpoint directory, sorted (cheap: no header is parsed)."""
    return sorted(Path(model_dir).glob("*.safetensors"))


def prefetch_page_cache(paths: Iterable[str | Path]) -> threading.Thread:
    """Start reading `paths` into the page cache in a daemon thread; return the (started) thread.

    Joining the thread waits until the read-ahead of every file has been *queued*, not read.
    """
    files = [Path(p) for p in paths]
    thread = threading.Thread(target=_advise, args=(files,), name="quickmoe-prefetch", daemon=True)
    thread.start()
    return thread


def _advise(files: list[Path]) -> None:
    if not hasattr(os, "posix_fadvise"):
        logger.debug("posix_fadvise is not available on this platform: no page-cache prefetch")
        return
    for file in files:
        try:
            fd = os.open(file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            logger.warning("prefetch: cannot open %s (%s)", file, exc)
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        except OSError as exc:
            logger.warning("prefetch: posix_fadvise(WILLNEED) failed on %s (%s)", file, exc)
        finally:
            os.close(fd)
    logger.debug("prefetch: read-ahead queued for %d file(s)", len(files))
