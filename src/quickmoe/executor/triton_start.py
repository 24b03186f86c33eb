"""Triton's own start, on a thread beside the weight load.

The first Triton launch in a process costs about half a second even when every kernel is in the kernel cache
(Triton's driver utilities, its launcher, the cache lookup: 0.52 s on the H100, scripts/probes/encode_probe.py),
then each further kernel only its cache load (~4 ms). Weight processing launches the first Triton kernel (the
MXFP4 experts' mma-pair encode), so that half second sat in the `process` phase. `TritonStart` pays it on a
background thread while the main thread loads the weights (I/O and copies), on a stream of its own so that the
launch never waits on the loader's copies; processing joins it first.
"""

from __future__ import annotations

import logging
import threading
import time

import torch

__all__ = ["TritonStart"]

logger = logging.getLogger(__name__)


class TritonStart:
    """One launch of the mma-pair encode on 4 bytes, on a daemon thread; `join()` waits for it (and logs, never
    raises, a failure: processing then meets the same error itself, with its own message)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.seconds: float | None = None
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name="quickmoe-triton-start", daemon=True)

    def start(self) -> TritonStart:
        self._thread.start()
        return self

    def _run(self) -> None:
        started = time.perf_counter()
        try:
            from quickmoe.kernels.mxfp4_mma_pairs import encode_mma_pairs_

            stream = torch.cuda.Stream(self.device)
            with torch.cuda.stream(stream):
                encode_mma_pairs_(torch.zeros(4, dtype=torch.uint8, device=self.device))
            stream.synchronize()
        except Exception as exc:  # noqa: BLE001 (a warm-up: whatever failed fails again where it is used)
            self.error = f"{type(exc).__name__}: {exc}"
            logger.debug("Triton's start on a thread failed (%s); processing starts it itself", self.error)
        self.seconds = time.perf_counter() - started

    def join(self) -> float | None:
        """Wait for the launch; its seconds (None if it never ran)."""
        self._thread.join()
        return self.seconds
