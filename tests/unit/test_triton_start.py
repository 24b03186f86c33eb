"""Triton's start on a thread beside the weight load (executor/triton_start.py): it never raises (on a machine
without CUDA it records the error), and on the GPU it launches the encode kernel, after which the main thread's
Triton launches give the reference bytes."""

from __future__ import annotations

import pytest
import torch

from quickmoe.executor.triton_start import TritonStart


def test_without_cuda_it_records_the_error_and_returns():
    if torch.cuda.is_available():
        pytest.skip("the machine has CUDA")
    start = TritonStart(torch.device("cuda")).start()
    start.built()
    assert isinstance(start.join(), float) and start.error is not None


@pytest.mark.gpu
def test_on_the_gpu_it_runs_and_leaves_triton_usable():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from quickmoe.kernels.mxfp4_mma_pairs import encode_mma_pairs_, encode_mma_pairs_ref_

    start = TritonStart(torch.device("cuda")).start()
    start.built()
    seconds = start.join()
    assert start.error is None and seconds is not None and seconds > 0
    blocks = torch.randint(0, 256, (64, 96), dtype=torch.uint8, device="cuda")
    assert torch.equal(encode_mma_pairs_(blocks.clone()), encode_mma_pairs_ref_(blocks.clone()))
