"""Programmatic dependent launch: only CUDA devices of compute capability >= 9 get it, QUICKMOE_PDL=0 turns it
off, the early trigger only for grids a quarter of what the device holds, and on the GPU a chain of PDL kernels (in a
CUDA graph too) gives the bits of plain launches, with the early triggers and the weights read before the waits."""

from __future__ import annotations

import pytest
import torch

from quickmoe.kernels import pdl

pytest.importorskip("triton")


@pytest.fixture
def fresh_pdl_cache():
    pdl.pdl_enabled.cache_clear()
    pdl._early_enabled.cache_clear()
    yield
    pdl.pdl_enabled.cache_clear()
    pdl._early_enabled.cache_clear()


def test_the_cpu_launches_plainly(fresh_pdl_cache):
    assert pdl.pdl_kwargs(torch.device("cpu")) == {"PDL": False}
    assert not pdl.pdl_early_trigger(torch.device("cpu"), 1, 1)


def test_the_early_trigger_takes_grids_of_a_quarter_of_the_resident_programs(fresh_pdl_cache, monkeypatch):
    monkeypatch.setattr(pdl, "pdl_enabled", lambda device: True)
    props = type("Props", (), {"multi_processor_count": 132, "max_threads_per_multi_processor": 2048})()
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    pdl._resident_programs.cache_clear()
    device = torch.device("cuda", 0)
    try:
        # 132 SMs x 64 warp slots: 1,056 programs of 8 warps at once, so up to 264; 16 warps: 528 -> 132
        assert pdl.pdl_early_trigger(device, 264, 8) and not pdl.pdl_early_trigger(device, 265, 8)
        assert pdl.pdl_early_trigger(device, 132, 16) and not pdl.pdl_early_trigger(device, 133, 16)
        assert pdl.pdl_early_trigger(device, 1, 1)
        monkeypatch.setenv("QUICKMOE_PDL_EARLY", "0")
        pdl._early_enabled.cache_clear()
        assert not pdl.pdl_early_trigger(device, 1, 1)
    finally:
        pdl._resident_programs.cache_clear()


def _eager_and_graphed(chain):
    """`chain()`'s results launched eagerly, then from a CUDA graph of it (captured after a warm-up, replayed once)."""
    eager = chain()
    graph = torch.cuda.CUDAGraph()
    chain()
    with torch.cuda.graph(graph):
        graphed = chain()
    graph.replay()
    torch.cuda.synchronize()
    return eager, graphed


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

    with_pdl, graphed = _eager_and_graphed(chain)
    assert pdl.pdl_kwargs(device).get("launch_pdl") is (torch.cuda.get_device_capability()[0] >= 9)
    monkeypatch.setenv("QUICKMOE_PDL", "0")
    pdl.pdl_enabled.cache_clear()
    assert pdl.pdl_kwargs(device) == {"PDL": False}
    plain = chain()
    for a, b, c in zip(with_pdl, graphed, plain):
        assert torch.equal(a, c) and torch.equal(b, c)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_weights_read_before_the_wait_give_the_bits_of_plain_launches(fresh_pdl_cache, monkeypatch):
    """A decode layer's chain at one token, each kernel reading what the one before wrote: the norm (triggering
    early) -> the router and the dense FP8 GEMV (their weights read before the wait) -> the quantizer (triggering
    early) -> the GEMV again; with PDL, in a CUDA graph, and without PDL: the same bits. A kernel that read its
    input before the wait would read the step before's (the values change every step)."""
    from quickmoe.formats.fp8 import quantize_fp8_block
    from quickmoe.kernels.fp8_gemv import fp8_block_gemv
    from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group
    from quickmoe.kernels.rms_norm import fused_add_rms_norm_fp8
    from quickmoe.kernels.router import router_route

    device = torch.device("cuda")
    g = torch.Generator().manual_seed(5)
    hidden, experts = 2048, 128
    x, res = (torch.randn(1, hidden, generator=g).to(torch.bfloat16).to(device) for _ in range(2))
    norm_w = (1 + 0.1 * torch.randn(hidden, generator=g)).to(torch.bfloat16).to(device)
    router_w = (0.05 * torch.randn(experts, hidden, generator=g)).to(torch.bfloat16).to(device)
    w_q, w_s = quantize_fp8_block(0.03 * torch.randn(hidden, hidden, generator=g), (128, 128))
    w_q, w_s = w_q.to(device), w_s.to(device)

    def chain():
        out, summed, results = x, res, []
        for _ in range(6):
            out, summed, q, scales = fused_add_rms_norm_fp8(out, summed, norm_w, 1e-6)
            results += router_route(out, router_w, None, 8, scoring="softmax_topk", renormalize=True)
            y = fp8_block_gemv(q, scales, w_q, w_s, (128, 128))
            out = fp8_block_gemv(*quantize_fp8_per_token_group(y), w_q, w_s, (128, 128))
            results += [y, out]
        return results

    with_pdl, graphed = _eager_and_graphed(chain)
    if torch.cuda.get_device_capability()[0] >= 9:
        assert pdl.pdl_early_trigger(device, 1, 8)
    monkeypatch.setenv("QUICKMOE_PDL", "0")
    pdl.pdl_enabled.cache_clear()
    pdl._early_enabled.cache_clear()
    plain = chain()
    assert len(plain) == 24 and plain[-1].abs().sum() > 0
    for a, b, c in zip(with_pdl, graphed, plain):
        assert torch.equal(a, c) and torch.equal(b, c)
