"""`BackgroundStart`: a library's first use, paid on a daemon thread beside the weight load.

The first launch of a library in a process costs far more than later ones (Triton's driver utilities and
launcher, cuBLAS's initialisation and handle), and the first decode graph's warm-up would pay it on the main
thread. A subclass's `work()` makes that first use on a thread of its own while the main thread loads the
weights; `join()` waits for it before processing. A failure is recorded and logged, never raised: the main
thread's own first use then meets the same error, with its own message.
"""

from __future__ import annotations

import logging
import threading
import time

import torch

__all__ = ["BackgroundStart"]

logger = logging.getLogger(__name__)


class BackgroundStart:
    """`work()` on a daemon thread named `quickmoe-NAME`; `seconds` and `error` once it ran."""

    name = "start"

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.seconds: float | None = None
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name=f"quickmoe-{self.name}", daemon=True)

    def work(self) -> None:
        raise NotImplementedError

    def start(self) -> BackgroundStart:
        self._thread.start()
        return self

    def _run(self) -> None:
        started = time.perf_counter()
        try:
            self.work()
        except Exception as exc:  # noqa: BLE001 (a warm-up: whatever failed fails again where it is used)
            self.error = f"{type(exc).__name__}: {exc}"
            logger.debug("%s on a thread failed (%s); the first use on the main thread starts it itself", self.name,
                         self.error)
        self.seconds = time.perf_counter() - started

    def join(self) -> float | None:
        """Wait for the work; its seconds (None if it never ran)."""
        self._thread.join()
        return self.seconds
