"""Triton's own start, on a thread beside the weight load.

The first Triton launch in a process costs about half a second even when every kernel is in the kernel cache
(Triton's driver utilities, its launcher, the cache lookup: 0.52 s on the H100, scripts/probes/encode_probe.py),
then each further kernel only its cache load (~4 ms). Weight processing launches the first Triton kernel (the
MXFP4 experts' mma-pair encode), so that half second sat in the `process` phase. `TritonStart` pays it on a
background thread while the main thread loads the weights (I/O and copies), on a stream of its own so that the
launch never waits on the loader's copies; processing joins it first.
"""

from __future__ import annotations

import torch

from quickmoe.executor.background_start import BackgroundStart

__all__ = ["TritonStart"]


class TritonStart(BackgroundStart):
    """One launch of the mma-pair encode on 4 bytes, on a daemon thread (`BackgroundStart`)."""

    name = "triton-start"

    def work(self) -> None:
        from quickmoe.kernels.mxfp4_mma_pairs import encode_mma_pairs_

        stream = torch.cuda.Stream(self.device)
        with torch.cuda.stream(stream):
            encode_mma_pairs_(torch.zeros(4, dtype=torch.uint8, device=self.device))
        stream.synchronize()
