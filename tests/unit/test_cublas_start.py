"""cuBLAS's start on a thread beside the weight load (executor/cublas_start.py): it never raises (on a machine
without CUDA it records the error), and on the GPU it runs its matmul, after which the main thread's matmuls give
the float64 reference."""

from __future__ import annotations

import pytest
import torch

from quickmoe.executor.cublas_start import CublasStart


def test_without_cuda_it_records_the_error_and_returns():
    if torch.cuda.is_available():
        pytest.skip("the machine has CUDA")
    start = CublasStart(torch.device("cuda"), torch.bfloat16).start()
    assert isinstance(start.join(), float) and start.error is not None


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_on_the_gpu_it_runs_and_leaves_cublas_usable(dtype):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    start = CublasStart(torch.device("cuda"), dtype).start()
    seconds = start.join()
    assert start.error is None and seconds is not None and seconds > 0
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(8, 2880, generator=g), torch.randn(512, 2880, generator=g) / 2880 ** 0.5
    got = torch.nn.functional.linear(x.to("cuda", dtype), w.to("cuda", dtype)).double().cpu()
    want = x.to(dtype).double() @ w.to(dtype).double().T
    assert (got - want).abs().max().item() < (0.05 if dtype == torch.bfloat16 else 1e-2)
