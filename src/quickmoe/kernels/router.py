"""The MoE router and its top-k in one kernel: `router_route` (Triton) beside `router_route_ref` (torch), same
signature.

logits = hidden W^T + b ([T, H] x [E, H] -> [T, E], accumulated in float32 and rounded to the hidden dtype, as
`F.linear`'s output is), then a scoring of `kernels/routing.py` ("topk_softmax": gpt-oss; "softmax_topk",
optionally renormalized: Mixtral, Qwen-MoE) -> (topk_weights [T, k] float32, topk_ids [T, k] int32).

Why one kernel: at decode sizes the router is a GEMV over a few hundred KB of weights (gpt-oss-20b: 32 x 2880
bf16, 184 KB), and as a cuBLAS GEMM (split-K at one row, then its reduction) followed by the routing kernel it
took three launches a layer, ~8 us of a batch-1 step's layer on the H100, about 4x the weights' read time.
One program reading all of them is no faster (~8 us: one SM's loads in flight), so the weights are read by
SPLIT programs per BLOCK_T = 16 tokens, each over H / SPLIT columns with tensor-core dots, writing float32
partial logits; the last program of the 16 tokens to finish (a ticket counter, taken after the partials are
stored, reset by that program) sums the SPLIT partials in order, adds the bias, rounds, and selects the k
experts.

Batch invariance: the tile shape, SPLIT and the warps depend on E and H only, never on T, and a token's logits
are its own row's partial sums added in a fixed order, so a token's experts and weights are the same bits alone
or in a batch of any size (tests/kernels/test_router.py checks it).

A program loads its first K step of the weights before its PDL wait (they are no kernel's output), so with the
norm ahead letting it launch early (kernels/pdl.py) the weights stream while the norm runs.

The ticket counters (`kernels/tickets.py`, one per 16 tokens) are zero between calls: calls on one device must run
one at a time (one stream), as the model's layers do.
"""

from __future__ import annotations

import torch

from quickmoe.kernels.pdl import pdl_kwargs
from quickmoe.kernels.routing import MAX_EXPERTS, check_scoring, route_ref
from quickmoe.kernels.tickets import MAX_TICKETS, ticket_counters

try:  # CPU installs without triton keep the torch reference
    import triton
    import triton.language as tl

    from quickmoe.kernels.pdl import pdl_wait
    from quickmoe.kernels.routing import padding_rows, select_and_store_topk
    from quickmoe.kernels.tickets import last_ticket, reset_ticket, store_part, sum_parts
except ImportError:  # pragma: no cover - exercised only where triton is absent
    triton = None

__all__ = ["ROUTER_MAX_EXPERTS", "ROUTER_MAX_TOKENS", "ROUTER_WIDE_MAX_TOKENS", "router_route",
           "router_route_preferred", "router_route_ref", "router_supported"]

ROUTER_MAX_EXPERTS = 256  # all E logits of 16 tokens in one program's registers
_BLOCK_T = 16  # tokens per program (the dot's smallest M)
ROUTER_MAX_TOKENS = 65536  # tokens a call (more go to the linear, then `route`): one ticket counter per 16
assert ROUTER_MAX_TOKENS // _BLOCK_T <= MAX_TICKETS
_SPLIT = 8  # programs reading one 16-token block's weights (each H / 8 columns)
_TILE_ELEMENTS = 8192  # BLOCK_E x BLOCK_H weight elements per K step: 16 KB of bf16
ROUTER_WIDE_MAX_TOKENS = 256  # tokens up to which more than 64 experts take the kernel (router_route_preferred)


def _check(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, top_k: int, scoring: str) -> None:
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(f"router: hidden {tuple(hidden.shape)} and weight {tuple(weight.shape)}: expected [T, H] "
                         "and [E, H]")
    num_experts = weight.shape[0]
    if bias is not None and tuple(bias.shape) != (num_experts,):
        raise ValueError(f"router: bias of shape {tuple(bias.shape)}; expected ({num_experts},)")
    check_scoring(num_experts, top_k, scoring)


def router_route_ref(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, top_k: int, *,
                     scoring: str = "topk_softmax", renormalize: bool = False,
                     num_valid_tokens: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """hidden [T, H], weight [E, H], bias [E] or None -> (topk_weights [T, k] float32, topk_ids [T, k] int32):
    `route_ref` of F.linear's logits (rows at and past num_valid_tokens: id E, weight 0; kernels/routing.py)."""
    _check(hidden, weight, bias, top_k, scoring)
    logits = torch.nn.functional.linear(hidden, weight, bias)  # [T, E] in hidden's dtype
    return route_ref(logits, top_k, scoring=scoring, renormalize=renormalize, num_valid_tokens=num_valid_tokens)


def router_supported(num_experts: int, num_tokens: int = 0) -> bool:
    """Whether `router_route` takes this many experts and tokens (else: the linear, then `routing.route`)."""
    return triton is not None and num_experts <= min(ROUTER_MAX_EXPERTS, MAX_EXPERTS) and \
        num_tokens <= ROUTER_MAX_TOKENS


def router_route_preferred(num_experts: int, num_tokens: int) -> bool:
    """Whether the model should route with `router_route` rather than the linear, then `routing.route`: where
    it was measured faster (scripts/probes/router_probe.py). Up to 64 experts at every T (H100, 2026-11-24:
    1.4-1.8x for 8 and 32 experts at T <= 1024, 0.8-0.9x at 8192; one configuration serves every T, so a token's
    routing is the same bits in any batch). More experts (Qwen3's 128) up to `ROUTER_WIDE_MAX_TOKENS` tokens, every
    decode batch of the default `max_num_seqs`: with their own tile (`_launch_config`) 6.9-7.1 us a call at T = 1
    and 64 against 10.3-10.8 for the linear and the routing kernel on the H200 (2026-11-29), but 0.3x at 8,192, so
    prompts of more tokens keep the linear (whose cuBLAS kernels change with T: its routing bits were never the
    same across batch sizes)."""
    if not router_supported(num_experts, num_tokens):
        return False
    return num_experts <= 64 or num_tokens <= ROUTER_WIDE_MAX_TOKENS


def router_route(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, top_k: int, *,
                 scoring: str = "topk_softmax", renormalize: bool = False,
                 num_valid_tokens: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The Triton kernel of `router_route_ref` (same arguments; same results up to float rounding and ties)."""
    _check(hidden, weight, bias, top_k, scoring)
    if not router_supported(weight.shape[0], hidden.shape[0]):
        raise ValueError(f"router_route: {weight.shape[0]} experts and {hidden.shape[0]} tokens; the kernel takes "
                         f"at most {ROUTER_MAX_EXPERTS} experts and {ROUTER_MAX_TOKENS} tokens")
    block_h, split, num_warps = _launch_config(weight.shape[0], hidden.shape[1])
    return launch_router_route(hidden, weight, bias, top_k, scoring, renormalize, block_h=block_h, split=split,
                               num_warps=num_warps, num_stages=3, num_valid_tokens=num_valid_tokens)


def _launch_config(num_experts: int, hidden_size: int) -> tuple[int, int, int]:
    """(K step, split, warps) from E and H alone (never T: batch invariance). Up to 64 experts: 8,192-element
    tiles, 8 programs, 4 warps (H100-tuned). More: 128-column steps, 16 programs, 8 warps, the best at T = 1 and 64
    of the probe's sweep for Qwen3's 128 x 2048 on the H200 (7.1 against 11.5 us with the narrow tile)."""
    block_e = max(16, triton.next_power_of_2(num_experts))  # the dot's N is at least 16
    if num_experts > 64:
        return min(128, triton.next_power_of_2(hidden_size)), 16, 8
    return max(32, min(256, _TILE_ELEMENTS // block_e, triton.next_power_of_2(hidden_size))), _SPLIT, 4


def launch_router_route(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, top_k: int,
                        scoring: str, renormalize: bool, *, block_h: int, split: int, num_warps: int,
                        num_stages: int, num_valid_tokens: torch.Tensor | None = None) -> tuple[torch.Tensor,
                                                                                                torch.Tensor]:
    """`router_route` at a given K step, split and launch configuration (checked arguments; for probes and
    tuning: the configuration must not depend on T, or batch invariance is lost)."""
    num_tokens, hidden_size = hidden.shape
    num_experts = weight.shape[0]
    hidden = hidden if hidden.stride(1) == 1 else hidden.contiguous()
    weight = weight if weight.stride(1) == 1 else weight.contiguous()
    weights = torch.empty(num_tokens, top_k, dtype=torch.float32, device=hidden.device)
    ids = torch.empty(num_tokens, top_k, dtype=torch.int32, device=hidden.device)
    if num_tokens == 0:
        return weights, ids
    block_e = max(16, triton.next_power_of_2(num_experts))
    # each program's columns: H / split rounded up to whole K steps (the last program's may be fewer)
    h_per_split = triton.cdiv(triton.cdiv(hidden_size, split), block_h) * block_h
    split = triton.cdiv(hidden_size, h_per_split)
    num_blocks = triton.cdiv(num_tokens, _BLOCK_T)
    partials = torch.empty(num_blocks * split * _BLOCK_T * block_e, dtype=torch.float32, device=hidden.device)
    cpu = hidden.device.type == "cpu"
    # float32 activations multiply exactly (never tf32); the interpreter's dot mishandles bf16, and bf16
    # products are exact in float32, so it computes in float32
    dot_dtype = tl.float32 if cpu or hidden.dtype == torch.float32 else \
        {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}[hidden.dtype]
    out_dtype = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32}[hidden.dtype]
    _router_route_kernel[(num_blocks, split)](
        hidden, weight, bias if bias is not None else weight, partials, ticket_counters(hidden.device, "router_route"),
        weights, ids, num_valid_tokens if num_valid_tokens is not None else ids,
        num_tokens, hidden.stride(0), weight.stride(0), H=hidden_size, E=num_experts, HAS_BIAS=bias is not None,
        HAS_VALID=num_valid_tokens is not None,
        TOP_K=top_k, BLOCK_T=_BLOCK_T, BLOCK_E=block_e, BLOCK_H=block_h, H_PER_SPLIT=h_per_split, SPLIT=split,
        BLOCK_K=triton.next_power_of_2(top_k), SOFTMAX_FIRST=scoring == "softmax_topk", RENORMALIZE=renormalize,
        DOT_DTYPE=dot_dtype, OUT_DTYPE=out_dtype, PRECISION="ieee" if dot_dtype == tl.float32 else "tf32",
        num_warps=num_warps, num_stages=num_stages, **pdl_kwargs(hidden.device))
    return weights, ids


if triton is not None:

    @triton.jit(do_not_specialize=["num_tokens"])
    def _router_route_kernel(hidden_ptr, weight_ptr, bias_ptr, partial_ptr, counter_ptr, weights_ptr, ids_ptr,
                             valid_ptr, num_tokens, stride_t, stride_e, H: tl.constexpr, E: tl.constexpr,
                             HAS_BIAS: tl.constexpr, HAS_VALID: tl.constexpr,
                             TOP_K: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr,
                             H_PER_SPLIT: tl.constexpr, SPLIT: tl.constexpr, BLOCK_K: tl.constexpr,
                             SOFTMAX_FIRST: tl.constexpr, RENORMALIZE: tl.constexpr, DOT_DTYPE: tl.constexpr,
                             OUT_DTYPE: tl.constexpr, PRECISION: tl.constexpr, PDL: tl.constexpr):
        block = tl.program_id(0)
        part = tl.program_id(1)
        lanes = tl.arange(0, BLOCK_T)
        rows = block * BLOCK_T + lanes  # [BT] tokens
        cols = tl.arange(0, BLOCK_E)  # [BE] experts
        row_ok = rows < num_tokens
        col_ok = cols < E
        # the first step's weights before the wait (no kernel writes them; kernels/pdl.py): with the norm ahead
        # letting this kernel start early, they are read while it runs
        hs = part * H_PER_SPLIT + tl.arange(0, BLOCK_H)
        h_ok = hs < H
        w = tl.load(weight_ptr + cols[:, None] * stride_e + hs[None, :], mask=col_ok[:, None] & h_ok[None, :],
                    other=0.0)  # [BE, BH]
        pdl_wait(PDL)
        x = tl.load(hidden_ptr + rows[:, None] * stride_t + hs[None, :], mask=row_ok[:, None] & h_ok[None, :],
                    other=0.0)  # [BT, BH]
        acc = tl.dot(x.to(DOT_DTYPE), tl.trans(w.to(DOT_DTYPE)), tl.zeros([BLOCK_T, BLOCK_E], dtype=tl.float32),
                     input_precision=PRECISION)  # [BT, BE]
        for step in range(BLOCK_H, H_PER_SPLIT, BLOCK_H):  # this program's other columns, in order
            hs = part * H_PER_SPLIT + step + tl.arange(0, BLOCK_H)
            h_ok = hs < H
            x = tl.load(hidden_ptr + rows[:, None] * stride_t + hs[None, :], mask=row_ok[:, None] & h_ok[None, :],
                        other=0.0)  # [BT, BH]
            w = tl.load(weight_ptr + cols[:, None] * stride_e + hs[None, :], mask=col_ok[:, None] & h_ok[None, :],
                        other=0.0)  # [BE, BH]
            acc = tl.dot(x.to(DOT_DTYPE), tl.trans(w.to(DOT_DTYPE)), acc, input_precision=PRECISION)  # [BT, BE]
        # slab block x SPLIT + part; the block's tokens only (at one token, 1 of the 16 rows)
        store_part(partial_ptr, block * SPLIT + part, acc, row_ok[:, None], BLOCK_T, BLOCK_E)
        if last_ticket(counter_ptr, block, SPLIT):  # the last of the block's programs: the others' partials are visible
            logits = sum_parts(partial_ptr, block * SPLIT, row_ok[:, None], SPLIT, BLOCK_T, BLOCK_E)  # in order
            reset_ticket(counter_ptr, block)
            if HAS_BIAS:
                logits += tl.load(bias_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
            logits = logits.to(OUT_DTYPE).to(tl.float32)  # rounded as F.linear's output is
            select_and_store_topk(logits, rows, row_ok, padding_rows(rows, valid_ptr, HAS_VALID), E, cols, col_ok,
                                  weights_ptr, ids_ptr, TOP_K=TOP_K, BLOCK_T=BLOCK_T, BLOCK_K=BLOCK_K,
                                  SOFTMAX_FIRST=SOFTMAX_FIRST, RENORMALIZE=RENORMALIZE)
