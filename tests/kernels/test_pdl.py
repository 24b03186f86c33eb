"""Programmatic dependent launch: only CUDA devices of compute capability >= 9 get it, QUICKMOE_PDL=0 turns it
off, and on the GPU a chain of PDL kernels (in a CUDA graph too) gives the bits of plain launches."""

from __future__ import annotations

import pytest
import torch

from quickmoe.kernels import pdl

pytest.importorskip("triton")


@pytest.fixture
def fresh_pdl_cache():
    pdl.pdl_enabled.cache_clear()
    yield
    pdl.pdl_enabled.cache_clear()


def test_the_cpu_launches_plainly(fresh_pdl_cache):
    assert pdl.pdl_kwargs(torch.device("cpu")) == {"PDL": False}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_pdl_kernels_give_the_bits_of_plain_launches(fresh_pdl_cache, monkeypatch):
    from quickmoe.kernels.rms_norm import fused_add_rms_norm

    device = torch.device("cuda")
    g = torch.Generator().manual_seed(3)
    x, res = (torch.randn(7, 2880, generator=g).to(torch.bfloat16).to(device) for _ in range(2))
    weight = torch.randn(2880, generator=g).to(torch.bfloat16).to(device)

    def chain():  # each launch reads what the one before it wrote
        out, summed = x, res
        for _ in range(8):
            out, summed = fused_add_rms_norm(out, summed, weight, 1e-5)
        return out, summed

    with_pdl = chain()
    graph = torch.cuda.CUDAGraph()
    chain()
    with torch.cuda.graph(graph):
        graphed = chain()
    graph.replay()
    torch.cuda.synchronize()
    assert pdl.pdl_kwargs(device).get("launch_pdl") is (torch.cuda.get_device_capability()[0] >= 9)
    monkeypatch.setenv("QUICKMOE_PDL", "0")
    pdl.pdl_enabled.cache_clear()
    assert pdl.pdl_kwargs(device) == {"PDL": False}
    plain = chain()
    for a, b, c in zip(with_pdl, graphed, plain):
        assert torch.equal(a, c) and torch.equal(b, c)
