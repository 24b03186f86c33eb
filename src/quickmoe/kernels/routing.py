"""Top-k expert routing: `route` (Triton) beside `route_ref` (torch), same signature.

Two scorings:
- "topk_softmax" (gpt-oss): the k largest logits, then a softmax over those k. The weights sum to 1.
- "softmax_topk" (Mixtral, Qwen-MoE): a softmax over all experts, then the k largest probabilities;
  `renormalize` divides them by their sum (Mixtral does, some Qwen configs do not).
Both return (topk_weights [T, k] float32, topk_ids [T, k] int32), the experts in decreasing score order.
Ties between equal scores go to the lower expert index in the kernel (torch.topk promises no order).
`num_valid_tokens` (an integer [1] on the device, or None): rows at and past it are padding (a CUDA graph's bucket
holds more rows than the step has tokens): they get expert id E, which no GEMM computes (`fused_moe`'s
absent_experts), and weight 0, whatever their scores. The count is read on the device, so one captured graph
serves every step of its bucket.

The kernel handles BLOCK_T tokens per program with all E logits of a token in registers (E <= 1024):
k rounds of (row max, argmax, mask the winner out) select the experts, then the softmax runs over the
k kept values (or the full-row softmax runs first). The maths is float32 whatever the logits' dtype.
"""

from __future__ import annotations

import torch

from quickmoe.kernels.pdl import pdl_kwargs

try:  # CPU installs without triton keep the torch references
    import triton
    import triton.language as tl

    from quickmoe.kernels.pdl import pdl_wait
except ImportError:  # pragma: no cover - exercised only where triton is absent
    triton = None

__all__ = ["SCORINGS", "check_scoring", "mask_padding_rows", "route", "route_ref", "topk_softmax_ref"]

SCORINGS = ("topk_softmax", "softmax_topk")
MAX_EXPERTS = 1024  # one token's logits live in registers


def _check(router_logits: torch.Tensor, top_k: int, scoring: str) -> None:
    if router_logits.dim() != 2:
        raise ValueError(f"router_logits: expected [T, E], got shape {tuple(router_logits.shape)}")
    check_scoring(router_logits.shape[1], top_k, scoring)


def check_scoring(num_experts: int, top_k: int, scoring: str) -> None:
    """The routing arguments every router entry point takes: 1 <= top_k <= E and a known scoring."""
    if not 1 <= top_k <= num_experts:
        raise ValueError(f"top_k = {top_k}: expected 1 <= top_k <= num_experts = {num_experts}")
    if scoring not in SCORINGS:
        raise ValueError(f"scoring = {scoring!r}: expected one of {list(SCORINGS)}")


def route_ref(router_logits: torch.Tensor, top_k: int, *, scoring: str = "topk_softmax",
              renormalize: bool = False, num_valid_tokens: torch.Tensor | None = None) -> tuple[torch.Tensor,
                                                                                                  torch.Tensor]:
    """router_logits [T, E] -> (topk_weights [T, k] float32, topk_ids [T, k] int32); see the module doc."""
    _check(router_logits, top_k, scoring)
    if num_valid_tokens is not None:
        weights, ids = route_ref(router_logits, top_k, scoring=scoring, renormalize=renormalize)
        return mask_padding_rows(weights, ids, num_valid_tokens, router_logits.shape[1])
    logits = router_logits.float()
    if scoring == "topk_softmax":
        values, ids = torch.topk(logits, top_k, dim=-1)  # [T, k]
        weights = torch.softmax(values, dim=-1)
    else:
        weights, ids = torch.topk(torch.softmax(logits, dim=-1), top_k, dim=-1)  # [T, k]
        if renormalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids.to(torch.int32)


def mask_padding_rows(topk_weights: torch.Tensor, topk_ids: torch.Tensor, num_valid_tokens: torch.Tensor,
                      num_experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows at and past num_valid_tokens (int [1] tensor) -> id num_experts and weight 0 (the module doc), in the
    inputs' dtypes."""
    padding = (torch.arange(topk_ids.shape[0], device=topk_ids.device) >= num_valid_tokens)[:, None]  # [T, 1]
    return (torch.where(padding, torch.zeros_like(topk_weights), topk_weights),
            torch.where(padding, torch.full_like(topk_ids, num_experts), topk_ids))


def topk_softmax_ref(router_logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """gpt-oss routing as the torch MoE reference uses it: top-k on the logits, then softmax over the k.

    router_logits [T, E] -> (topk_weights [T, k] in the logits' dtype, topk_ids [T, k] int64).
    """
    values, topk_ids = torch.topk(router_logits, top_k, dim=-1)  # [T, k]
    return torch.softmax(values, dim=-1), topk_ids


def route(router_logits: torch.Tensor, top_k: int, *, scoring: str = "topk_softmax",
          renormalize: bool = False, num_valid_tokens: torch.Tensor | None = None) -> tuple[torch.Tensor,
                                                                                              torch.Tensor]:
    """The Triton kernel of `route_ref` (same arguments, same results up to float rounding and ties)."""
    _check(router_logits, top_k, scoring)
    if triton is None:
        raise RuntimeError("route needs triton (pip install triton); route_ref is the torch version")
    num_tokens, num_experts = router_logits.shape
    if num_experts > MAX_EXPERTS:
        raise ValueError(f"route: {num_experts} experts; the kernel holds at most {MAX_EXPERTS} per token")
    logits = router_logits if router_logits.stride(1) == 1 else router_logits.contiguous()
    weights = torch.empty(num_tokens, top_k, dtype=torch.float32, device=logits.device)
    ids = torch.empty(num_tokens, top_k, dtype=torch.int32, device=logits.device)
    if num_tokens == 0:
        return weights, ids
    block_e = triton.next_power_of_2(num_experts)
    block_t = max(1, min(16, 4096 // block_e))  # about 4096 logits per program
    grid = (triton.cdiv(num_tokens, block_t),)
    _route_kernel[grid](logits, weights, ids, num_valid_tokens if num_valid_tokens is not None else ids, num_tokens,
                        num_experts, logits.stride(0), HAS_VALID=num_valid_tokens is not None, TOP_K=top_k,
                        BLOCK_T=block_t, BLOCK_E=block_e, BLOCK_K=triton.next_power_of_2(top_k),
                        SOFTMAX_FIRST=scoring == "softmax_topk", RENORMALIZE=renormalize,
                        **pdl_kwargs(logits.device))
    return weights, ids


if triton is not None:

    @triton.jit
    def _route_kernel(logits_ptr, weights_ptr, ids_ptr, valid_ptr, num_tokens, num_experts, stride_t,
                      HAS_VALID: tl.constexpr, TOP_K: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_E: tl.constexpr,
                      BLOCK_K: tl.constexpr,
                      SOFTMAX_FIRST: tl.constexpr, RENORMALIZE: tl.constexpr, PDL: tl.constexpr):
        pdl_wait(PDL)
        rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)  # [BT] tokens
        cols = tl.arange(0, BLOCK_E)  # [BE] experts
        row_ok = rows < num_tokens
        col_ok = cols < num_experts
        # rows past the end read zeros (no NaN from an all -inf row); experts past E never win
        x = tl.load(logits_ptr + rows[:, None] * stride_t + cols[None, :],
                    mask=row_ok[:, None] & col_ok[None, :], other=0.0).to(tl.float32)  # [BT, BE]
        select_and_store_topk(x, rows, row_ok, padding_rows(rows, valid_ptr, HAS_VALID), num_experts, cols, col_ok,
                              weights_ptr, ids_ptr, TOP_K=TOP_K, BLOCK_T=BLOCK_T, BLOCK_K=BLOCK_K,
                              SOFTMAX_FIRST=SOFTMAX_FIRST, RENORMALIZE=RENORMALIZE)

    @triton.jit
    def padding_rows(rows, valid_ptr, HAS_VALID: tl.constexpr):
        """[BT] whether each row is padding: at or past the count at valid_ptr (HAS_VALID), else none."""
        padding = rows < 0
        if HAS_VALID:
            padding = rows >= tl.load(valid_ptr)
        return padding

    @triton.jit
    def select_and_store_topk(x, rows, row_ok, padding, absent_id, cols, col_ok, weights_ptr, ids_ptr,
                              TOP_K: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_K: tl.constexpr,
                              SOFTMAX_FIRST: tl.constexpr, RENORMALIZE: tl.constexpr):
        """x [BT, BE] float32 scores of tokens `rows` (experts `cols`; col_ok masks the padding columns) -> the k
        experts and their weights stored at rows * TOP_K: the scoring of the module docstring. Rows where
        `padding` ([BT]) store id absent_id and weight 0."""
        x = tl.where(col_ok[None, :], x, float("-inf"))
        if SOFTMAX_FIRST:
            p = tl.exp(x - tl.max(x, axis=1)[:, None])
            p = p / tl.sum(p, axis=1)[:, None]
            x = tl.where(col_ok[None, :], p, -1.0)  # probabilities >= 0 > -1: padding never wins
        kcols = tl.arange(0, BLOCK_K)
        top_vals = tl.full([BLOCK_T, BLOCK_K], float("-inf"), tl.float32)
        top_ids = tl.zeros([BLOCK_T, BLOCK_K], tl.int32)
        for i in tl.static_range(TOP_K):
            best = tl.max(x, axis=1)  # [BT]
            winner = tl.argmax(x, axis=1, tie_break_left=True)  # [BT], lowest index among ties
            top_vals = tl.where(kcols[None, :] == i, best[:, None], top_vals)
            top_ids = tl.where(kcols[None, :] == i, winner[:, None].to(tl.int32), top_ids)
            x = tl.where(cols[None, :] == winner[:, None], float("-inf"), x)  # out of the next rounds
        k_ok = kcols < TOP_K
        if SOFTMAX_FIRST:
            w = tl.where(k_ok[None, :], top_vals, 0.0)
            if RENORMALIZE:
                w = w / tl.sum(w, axis=1)[:, None]
        else:
            # top_vals[:, 0] is the row max: exp(v - max) <= 1, and the padding columns count 0
            e = tl.where(k_ok[None, :], tl.exp(top_vals - tl.max(top_vals, axis=1)[:, None]), 0.0)
            w = e / tl.sum(e, axis=1)[:, None]
        w = tl.where(padding[:, None], 0.0, w)
        top_ids = tl.where(padding[:, None], absent_id, top_ids)
        out = rows[:, None] * TOP_K + kcols[None, :]
        out_ok = row_ok[:, None] & k_ok[None, :]
        tl.store(weights_ptr + out, w, mask=out_ok)
        tl.store(ids_ptr + out, top_ids, mask=out_ok)
