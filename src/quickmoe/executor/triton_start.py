"""Triton's own start, on a thread beside the weight load.

The first Triton launch in a process costs about half a second even when every kernel is in the kernel cache
(Triton's driver utilities, its launcher, the cache lookup: 0.52 s on the H100, scripts/probes/encode_probe.py),
then each further kernel only its cache load (~4 ms). Weight processing launches the first Triton kernel (the
MXFP4 experts' mma-pair encode), so that half second sat in the `process` phase. `TritonStart` pays it on a
background thread while the main thread loads the weights (I/O and copies), on a stream of its own so that the
launch never waits on the loader's copies; processing joins it first. It first settles the kernels' source keys
(executor/kernel_keys.py), so that every start keys its kernels alike whatever order it launches them in.
"""

from __future__ import annotations

import threading

import torch

from quickmoe.executor.background_start import BackgroundStart

__all__ = ["TritonStart"]


class TritonStart(BackgroundStart):
    """The kernels' keys settled, then one launch of the mma-pair encode on 4 bytes, on a daemon thread
    (`BackgroundStart`), once `built()` says the model is built: the settling imports kernel modules and parses
    their sources, which beside the build (Python, and the same imports) took ~0.1 s from it on the H200."""

    name = "triton-start"
    BUILD_WAIT_S = 60.0  # a start that fails before `built()` leaves the thread waiting at most this long

    def __init__(self, device: torch.device) -> None:
        super().__init__(device)
        self._built = threading.Event()

    def built(self) -> None:
        """The model is built: the loader's I/O and copies, which leave the interpreter to this thread, come next."""
        self._built.set()

    def work(self) -> None:
        from quickmoe.executor.kernel_keys import settle_kernel_keys
        from quickmoe.kernels.mxfp4_mma_pairs import encode_mma_pairs_

        self._built.wait(self.BUILD_WAIT_S)
        settle_kernel_keys()  # before any kernel of this process is hashed (kernel_keys.py)

        stream = torch.cuda.Stream(self.device)
        with torch.cuda.stream(stream):
            encode_mma_pairs_(torch.zeros(4, dtype=torch.uint8, device=self.device))
        stream.synchronize()
