"""`route` (Triton; the interpreter on CPU) against `route_ref` (torch), on fresh random logits:
both scorings, renormalization, k = 1..8, expert counts that are and are not powers of two, T = 1 and
ragged T, float32 and bf16 logits; and the argument checks."""

from __future__ import annotations

import pytest
import torch

from quickmoe.kernels.routing import route, route_ref

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _logits(num_tokens: int, num_experts: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (3 * torch.randn(num_tokens, num_experts, generator=g)).to(dtype).to(DEVICE)


@pytest.mark.parametrize("scoring,renormalize", [("topk_softmax", False), ("softmax_topk", False),
                                                 ("softmax_topk", True)])
@pytest.mark.parametrize("num_tokens,num_experts,top_k", [(1, 32, 4), (7, 4, 1), (33, 40, 4), (300, 128, 4),
                                                          (64, 32, 8), (5, 24, 2)])
def test_route_matches_the_reference(scoring, renormalize, num_tokens, num_experts, top_k):
    logits = _logits(num_tokens, num_experts, torch.float32, seed=num_tokens * 1000 + num_experts + top_k)
    weights, ids = route(logits, top_k, scoring=scoring, renormalize=renormalize)
    want_weights, want_ids = route_ref(logits, top_k, scoring=scoring, renormalize=renormalize)
    assert ids.dtype == torch.int32 and weights.dtype == torch.float32
    assert ids.shape == weights.shape == (num_tokens, top_k)
    assert torch.equal(ids.cpu(), want_ids.cpu())  # float32 random logits: no ties
    torch.testing.assert_close(weights.cpu(), want_weights.cpu(), rtol=1e-5, atol=1e-6)
    if scoring == "topk_softmax" or renormalize:
        torch.testing.assert_close(weights.sum(-1).cpu(), torch.ones(num_tokens), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scoring", ["topk_softmax", "softmax_topk"])
def test_route_bf16_logits(scoring):
    """bf16 logits tie often: the kernel's experts must score what the reference's score, in order."""
    logits = _logits(97, 32, torch.bfloat16, seed=11)
    weights, ids = route(logits, 4, scoring=scoring)
    want_weights, want_ids = route_ref(logits, 4, scoring=scoring)
    chosen = logits.float().gather(1, ids.long()).cpu()
    wanted = logits.float().gather(1, want_ids.long()).cpu()
    assert torch.equal(chosen, wanted)
    assert all(len(set(row)) == 4 for row in ids.cpu().tolist())  # four distinct experts per token
    torch.testing.assert_close(weights.cpu(), want_weights.cpu(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scoring", ["topk_softmax", "softmax_topk"])
@pytest.mark.parametrize("num_experts,top_k", [(128, 8), (40, 4), (32, 1)])
def test_route_ties_go_to_the_lower_expert(scoring, num_experts, top_k):
    """Logits from a few values (negative ones, -0.0 beside +0.0) tie everywhere: the experts must be a naive
    ranking's, by score, then by index (-0.0 and +0.0 equal), in that order."""
    g = torch.Generator().manual_seed(num_experts + top_k)
    values = torch.tensor([-2.5, -1.0, -0.0, 0.0, 0.75, 3.0])
    logits = values[torch.randint(0, len(values), (23, num_experts), generator=g)]
    _, ids = route(logits.to(DEVICE), top_k, scoring=scoring, renormalize=True)
    want = [sorted(range(num_experts), key=lambda e, row=row: (-row[e], e))[:top_k] for row in logits.tolist()]
    assert ids.cpu().tolist() == want
    _, want_ids = route_ref(logits, top_k, scoring=scoring, renormalize=True)
    assert torch.equal(logits.gather(1, ids.cpu().long()), logits.gather(1, want_ids.long()))


def test_route_strided_logits_and_no_tokens():
    logits = _logits(20, 64, torch.float32, seed=3)[:, :32]  # a view with row stride 64
    weights, ids = route(logits, 2)
    want_weights, want_ids = route_ref(logits, 2)
    assert torch.equal(ids.cpu(), want_ids.cpu())
    torch.testing.assert_close(weights.cpu(), want_weights.cpu())
    empty_w, empty_ids = route(logits[:0], 2)
    assert empty_w.shape == empty_ids.shape == (0, 2)


def test_route_rejects_bad_arguments():
    logits = _logits(3, 8, torch.float32, seed=0)
    with pytest.raises(ValueError, match="top_k = 9: expected 1 <= top_k <= num_experts = 8"):
        route(logits, 9)
    with pytest.raises(ValueError, match="scoring = 'sigmoid'"):
        route_ref(logits, 2, scoring="sigmoid")
    with pytest.raises(ValueError, match=r"expected \[T, E\]"):
        route(logits[0], 2)



@pytest.mark.parametrize("scoring,renormalize", [("topk_softmax", False), ("softmax_topk", True)])
@pytest.mark.parametrize("num_tokens,num_valid", [(64, 43), (40, 0), (33, 33), (20, 1)])
def test_route_sends_padding_rows_to_no_expert(scoring, renormalize, num_tokens, num_valid):
    """num_valid_tokens (a count on the device: a CUDA graph's step): rows at and past it get id E and weight 0,
    the rows before it what routing them alone gives; the reference (a loop over rows, written here) agrees."""
    num_experts, top_k = 24, 4
    logits = _logits(num_tokens, num_experts, torch.float32, seed=7 * num_tokens + num_valid)
    count = torch.tensor([num_valid], dtype=torch.int32, device=DEVICE)
    weights, ids = route(logits, top_k, scoring=scoring, renormalize=renormalize, num_valid_tokens=count)
    ref_weights, ref_ids = route_ref(logits, top_k, scoring=scoring, renormalize=renormalize, num_valid_tokens=count)
    alone_weights, alone_ids = route_ref(logits[:num_valid], top_k, scoring=scoring, renormalize=renormalize)
    for w, i in ((weights, ids), (ref_weights, ref_ids)):
        assert i.dtype == torch.int32 and i.shape == (num_tokens, top_k)
        for row in range(num_tokens):
            if row < num_valid:
                assert torch.equal(i[row].cpu(), alone_ids[row].cpu()), row
                torch.testing.assert_close(w[row].cpu(), alone_weights[row].cpu(), rtol=1e-5, atol=1e-6)
            else:
                assert (i[row] == num_experts).all() and (w[row] == 0).all(), row
