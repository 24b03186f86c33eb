"""`router_route` (the router's GEMM and the top-k in one Triton kernel; the interpreter on CPU) against an
independent reference: float64 logits (hidden W^T + b), rounded to the hidden dtype, scored by `route_ref`. Fresh
random inputs; both scorings and renormalization; expert counts that are and are not powers of two, up to the
kernel's 256; hidden sizes that are not multiples of the kernel's K step; T = 1, ragged T and several programs;
a token's result the same bits alone as in a batch; the argument checks."""

from __future__ import annotations

import pytest
import torch

from quickmoe.kernels.router import ROUTER_MAX_EXPERTS, router_route, router_route_ref
from quickmoe.kernels.routing import route_ref

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _inputs(num_tokens: int, num_experts: int, hidden_size: int, dtype: torch.dtype, seed: int, bias: bool = True):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(num_tokens, hidden_size, generator=g).to(dtype).to(DEVICE)
    weight = (torch.randn(num_experts, hidden_size, generator=g) / hidden_size ** 0.5 * 3).to(dtype).to(DEVICE)
    b = torch.randn(num_experts, generator=g).to(dtype).to(DEVICE) if bias else None
    return hidden, weight, b


def _float64_logits(hidden, weight, bias) -> torch.Tensor:
    logits = hidden.double().cpu() @ weight.double().cpu().T  # [T, E]
    if bias is not None:
        logits = logits + bias.double().cpu()
    return logits


@pytest.mark.parametrize("scoring,renormalize", [("topk_softmax", False), ("softmax_topk", False),
                                                 ("softmax_topk", True)])
@pytest.mark.parametrize("num_tokens,num_experts,hidden_size,top_k,bias", [
    (1, 32, 384, 4, True), (7, 8, 200, 2, False), (33, 40, 96, 4, True), (70, 128, 256, 8, False),
    (5, 24, 1100, 1, True)])
def test_router_route_matches_float64_logits(scoring, renormalize, num_tokens, num_experts, hidden_size, top_k, bias):
    hidden, weight, b = _inputs(num_tokens, num_experts, hidden_size, torch.float32,
                                seed=num_tokens * 1000 + num_experts + top_k, bias=bias)
    weights, ids = router_route(hidden, weight, b, top_k, scoring=scoring, renormalize=renormalize)
    want_weights, want_ids = route_ref(_float64_logits(hidden, weight, b).float(), top_k, scoring=scoring,
                                       renormalize=renormalize)
    assert ids.dtype == torch.int32 and weights.dtype == torch.float32
    assert ids.shape == weights.shape == (num_tokens, top_k)
    assert torch.equal(ids.cpu(), want_ids)  # float32 random logits: no ties
    torch.testing.assert_close(weights.cpu(), want_weights, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("scoring", ["topk_softmax", "softmax_topk"])
def test_router_route_bf16_picks_the_largest_rounded_logits(scoring):
    """bf16 hidden: the logits are rounded to bf16 (as F.linear's), where ties are common; the kernel's experts
    must have the reference's float64 logits up to one rounding, and its weights the softmax of its picks."""
    hidden, weight, b = _inputs(97, 32, 2880, torch.bfloat16, seed=11)
    weights, ids = router_route(hidden, weight, b, 4, scoring=scoring)
    logits = _float64_logits(hidden, weight, b)  # [T, E] float64
    rounded = logits.to(torch.bfloat16).double()
    _, want_ids = route_ref(rounded.float(), 4, scoring=scoring)
    chosen = rounded.gather(1, ids.long().cpu())  # [T, k]
    wanted = rounded.gather(1, want_ids.long())
    ulp = wanted.abs() * 2.0 ** -7  # one bf16 rounding of the float32 sum
    assert (chosen - wanted).abs().le(ulp + 1e-6).all()
    assert all(len(set(row)) == 4 for row in ids.cpu().tolist())  # four distinct experts per token
    # the weights are the scoring of the kernel's own picks
    picked = chosen.float()
    want_weights = torch.softmax(picked, -1) if scoring == "topk_softmax" else \
        torch.softmax(rounded.float(), -1).gather(1, ids.long().cpu())
    torch.testing.assert_close(weights.cpu(), want_weights, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("num_experts", [32, 128])
def test_router_route_is_batch_invariant(dtype, num_experts):
    """A token's experts and weights are the same bits alone, in a batch of 64, and in one of 300 (the tile
    shape depends on E and H, not on T; 128 experts take the wide tile). The interpreter's dot is numpy's matmul,
    whose BLAS rounds a row by its position in the tile, so on CPU only tokens in the first row of their tile are
    compared."""
    hidden, weight, b = _inputs(300, num_experts, 640, dtype, seed=5)
    batch_w, batch_ids = router_route(hidden, weight, b, 4)
    mid_w, mid_ids = router_route(hidden[:64], weight, b, 4)
    for t in ((0, 17, 63) if DEVICE == "cuda" else (0, 16, 48)):
        w, i = router_route(hidden[t:t + 1], weight, b, 4)
        assert torch.equal(i[0], batch_ids[t]) and torch.equal(w[0], batch_w[t])
        assert torch.equal(i[0], mid_ids[t]) and torch.equal(w[0], mid_w[t])


def test_router_route_leaves_its_tickets_at_zero_and_repeats_itself():
    """The last program of each 16 tokens sums the partials and sets its ticket back to zero: a second call (or
    one whose blocks reuse those tickets) finds them at zero and gives the same result."""
    from quickmoe.kernels.tickets import ticket_counters

    hidden, weight, b = _inputs(70, 32, 640, torch.float32, seed=8)
    first = router_route(hidden, weight, b, 4)
    assert not ticket_counters(hidden.device, "router_route").any()
    second = router_route(hidden, weight, b, 4)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


def test_router_route_ref_is_linear_then_route():
    hidden, weight, b = _inputs(9, 16, 64, torch.float32, seed=2)
    weights, ids = router_route_ref(hidden, weight, b, 3, scoring="softmax_topk", renormalize=True)
    want = route_ref(torch.nn.functional.linear(hidden, weight, b), 3, scoring="softmax_topk", renormalize=True)
    assert torch.equal(ids, want[1]) and torch.equal(weights, want[0])


def test_router_route_strided_hidden_and_no_tokens():
    hidden, weight, b = _inputs(20, 32, 256, torch.float32, seed=3)
    wide = torch.cat([hidden, hidden], dim=1)[:, :256]  # a view with row stride 512
    weights, ids = router_route(wide, weight, b, 2)
    want_weights, want_ids = router_route(hidden.contiguous(), weight, b, 2)
    assert torch.equal(ids, want_ids) and torch.equal(weights, want_weights)
    empty_w, empty_ids = router_route(hidden[:0], weight, b, 2)
    assert empty_w.shape == empty_ids.shape == (0, 2)


def test_router_route_rejects_bad_arguments():
    hidden, weight, b = _inputs(4, 8, 32, torch.float32, seed=1)
    with pytest.raises(ValueError, match=r"hidden \(4, 32\) and weight \(8, 16\)"):
        router_route(hidden, weight[:, :16], b, 2)
    with pytest.raises(ValueError, match=r"bias of shape \(7,\); expected \(8,\)"):
        router_route(hidden, weight, b[:7], 2)
    with pytest.raises(ValueError, match="top_k = 9"):
        router_route(hidden, weight, b, 9)
    with pytest.raises(ValueError, match="scoring = 'nope'"):
        router_route(hidden, weight, b, 2, scoring="nope")
    many = torch.zeros(ROUTER_MAX_EXPERTS + 1, 32, device=DEVICE)
    with pytest.raises(ValueError, match=f"{ROUTER_MAX_EXPERTS + 1} experts"):
        router_route(hidden, many, None, 2)


def test_the_model_routes_with_the_kernel_where_it_was_measured_faster():
    from quickmoe.kernels.router import router_route_preferred

    assert router_route_preferred(32, 1) and router_route_preferred(8, 8192)  # gpt-oss-20b, Mixtral
    # Qwen3-MoE: the kernel for every decode batch of the default max_num_seqs (256), the linear for longer prompts
    assert router_route_preferred(128, 1) and router_route_preferred(128, 256)
    assert not router_route_preferred(128, 257)
    assert not router_route_preferred(32, 70000)  # more tokens than the ticket counters cover


@pytest.mark.parametrize("num_experts,softmax_first", [(32, False), (128, True)])
def test_router_route_sends_padding_rows_to_no_expert(num_experts, softmax_first):
    """num_valid_tokens: the rows at and past the count on the device get id E and weight 0; the rows before it
    are what the kernel gives them without the count (and the float64 reference's experts)."""
    hidden, weight, b = _inputs(70, num_experts, 256, torch.float32, seed=num_experts, bias=not softmax_first)
    scoring = "softmax_topk" if softmax_first else "topk_softmax"
    count = torch.tensor([45], dtype=torch.int32, device=DEVICE)
    weights, ids = router_route(hidden, weight, b, 4, scoring=scoring, renormalize=softmax_first,
                                num_valid_tokens=count)
    all_weights, all_ids = router_route(hidden, weight, b, 4, scoring=scoring, renormalize=softmax_first)
    want_ids = route_ref(_float64_logits(hidden, weight, b).float(), 4, scoring=scoring, renormalize=softmax_first)[1]
    assert torch.equal(ids[:45], all_ids[:45]) and torch.equal(weights[:45], all_weights[:45])
    assert torch.equal(ids[:45].cpu(), want_ids[:45])
    assert (ids[45:] == num_experts).all() and (weights[45:] == 0).all()
    ref_weights, ref_ids = router_route_ref(hidden, weight, b, 4, scoring=scoring, renormalize=softmax_first,
                                            num_valid_tokens=count)
    assert (ref_ids[45:] == num_experts).all() and (ref_weights[45:] == 0).all()
    assert torch.equal(ref_ids[:45].cpu(), want_ids[:45])
