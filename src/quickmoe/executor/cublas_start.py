"""cuBLAS's first call, on a thread beside the weight load.

The first `F.linear` of a process on a GPU pays cuBLAS's start: the library's initialisation and a handle. On the
H100 it took 105-109 ms (`scripts/probes/first_token_probe.py --mode timers`, docs/benchmarks.md, Cold start II),
inside the capture phase: the first decode graph's warm-up runs the QKV projection through cuBLAS. `CublasStart`
makes that call on a daemon thread of its own while the main thread loads the weights. PyTorch releases the GIL
around the operator, so the load's Python work goes on meanwhile; when the thread ends, its handle returns to
PyTorch's pool, where the main thread's first call finds it. The thread uses a stream of its own, so its matmul
never waits on the loader's copies.
"""

from __future__ import annotations

import torch

from quickmoe.executor.background_start import BackgroundStart

__all__ = ["CublasStart"]


class CublasStart(BackgroundStart):
    """One small matmul in `dtype` on a daemon thread (`BackgroundStart`)."""

    name = "cublas-start"

    def __init__(self, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__(device)
        self.dtype = dtype

    def work(self) -> None:
        with torch.cuda.device(self.device):
            stream = torch.cuda.Stream(self.device)
            with torch.cuda.stream(stream):
                x = torch.ones(16, 64, dtype=self.dtype, device=self.device)
                y = torch.nn.functional.linear(x, x)  # [16, 16]: 64 in each entry
            stream.synchronize()
            if y[0, 0].item() != 64:
                raise RuntimeError(f"a 16 x 64 matmul of ones gave {y[0, 0].item()}, expected 64")
