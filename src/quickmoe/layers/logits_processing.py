"""What happens to a row's logits before the sampler chooses (vLLM's order and definitions):

1. ids the row may not choose now (`RowContext.blocked_ids`: the stop ids while fewer than `min_tokens` outputs
   exist) get -inf;
2. `logit_bias` is added;
3. penalties over the row's tokens: `repetition_penalty` r divides a positive logit of a token seen in the prompt
   or the outputs by r and multiplies a non-positive one by r; then logit -= frequency_penalty x (times the token
   was generated) + presence_penalty x (1 if it was generated);
4. an allowed-token bitmask (structured output) leaves -inf on every token it does not allow.
Greedy rows take the argmax of the result; sampled rows divide it by their temperature, then `min_p`
(`apply_min_p`), top-k and top-p apply. Every row is processed on its own (batch-invariant).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

__all__ = ["ProcessedRowParams", "RowContext", "apply_min_p", "apply_token_bitmask", "needs_processing",
           "process_logits"]


class ProcessedRowParams(Protocol):
    """The fields of a row's parameters that logits processing reads (the engine's SamplingParams has them)."""

    presence_penalty: float
    frequency_penalty: float
    repetition_penalty: float
    logit_bias: tuple[tuple[int, float], ...]
    min_p: float


@dataclass(frozen=True)
class RowContext:
    """What processing one row needs beyond its parameters: its tokens so far (penalties read them), and the ids
    it may not choose at this step (min_tokens: the stop ids)."""

    prompt_ids: Sequence[int] = ()
    output_ids: Sequence[int] = ()
    blocked_ids: tuple[int, ...] = ()


def _penalized(p: ProcessedRowParams) -> bool:
    return p.presence_penalty != 0 or p.frequency_penalty != 0 or p.repetition_penalty != 1


def needs_processing(params: Sequence[ProcessedRowParams], contexts: Sequence[RowContext | None] | None) -> bool:
    """Whether `process_logits` would change anything (the common case skips it entirely)."""
    if contexts is not None and any(c is not None and c.blocked_ids for c in contexts):
        return True
    return any(p.logit_bias or _penalized(p) for p in params)


def _put(t: list, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    host = torch.tensor(t, dtype=dtype)
    return host.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else host


def _token_counts(rows: list[Sequence[int]], vocab: int, device: torch.device) -> torch.Tensor:
    """[R, V] float32: how often each token occurs in each row's list."""
    width = max((len(r) for r in rows), default=0)
    ids = [list(r) + [vocab] * (width - len(r)) for r in rows]  # padded with an extra column, cut below
    counts = torch.zeros(len(rows), vocab + 1, dtype=torch.float32, device=device)
    if width:
        index = _put(ids, device, torch.int64)
        counts.scatter_add_(1, index, torch.ones(index.shape, dtype=torch.float32, device=device))
    return counts[:, :vocab]


def process_logits(logits: torch.Tensor, params: Sequence[ProcessedRowParams],
                   contexts: Sequence[RowContext | None] | None) -> torch.Tensor:
    """Steps 1-3 of the module docstring on float32 logits [B, V]; returns a new tensor (the input is kept)."""
    logits = logits.clone()
    device, vocab = logits.device, logits.shape[1]
    contexts = contexts if contexts is not None else [None] * len(params)
    blocked = [(i, t) for i, c in enumerate(contexts) if c is not None for t in c.blocked_ids if t < vocab]
    if blocked:
        rows, ids = zip(*blocked)
        logits[_put(list(rows), device, torch.int64), _put(list(ids), device, torch.int64)] = float("-inf")
    biased = [(i, t, b) for i, p in enumerate(params) for t, b in p.logit_bias]
    if biased:
        rows, ids, bias = zip(*biased)
        logits.index_put_((_put(list(rows), device, torch.int64), _put(list(ids), device, torch.int64)),
                          _put(list(bias), device, torch.float32), accumulate=True)
    penalized = [i for i, p in enumerate(params) if _penalized(p)]
    if penalized:
        ctx = [contexts[i] or RowContext() for i in penalized]
        index = _put(penalized, device, torch.int64)
        sub = logits[index]  # [R, V]
        counts = _token_counts([c.output_ids for c in ctx], vocab, device)  # [R, V]
        generated = counts > 0
        seen = generated | (_token_counts([c.prompt_ids for c in ctx], vocab, device) > 0)
        rep = _put([[float(params[i].repetition_penalty)] for i in penalized], device, torch.float32)  # [R, 1]
        sub = torch.where(seen, torch.where(sub > 0, sub / rep, sub * rep), sub)
        freq = _put([[float(params[i].frequency_penalty)] for i in penalized], device, torch.float32)
        pres = _put([[float(params[i].presence_penalty)] for i in penalized], device, torch.float32)
        sub = sub - freq * counts - pres * generated.float()
        logits = logits.index_copy(0, index, sub)
    return logits


def apply_token_bitmask(logits: torch.Tensor, bitmask: torch.Tensor) -> torch.Tensor:
    """logits [B, V] with -inf where bitmask [B, ceil(V / 32)] int32 (bit j of word w allows token 32 w + j;
    llguidance's and xgrammar's layout) has a 0 bit."""
    vocab, device = logits.shape[1], logits.device
    if device.type == "cuda" and not bitmask.is_cuda:  # through page-locked memory: no wait for the device
        bitmask = bitmask.pin_memory().to(device, non_blocking=True)
    bits = torch.arange(32, device=device, dtype=torch.int32)
    allowed = ((bitmask.to(device)[:, :, None] >> bits) & 1).bool().flatten(1)[:, :vocab]  # [B, V]
    return logits.masked_fill(~allowed, float("-inf"))


def apply_min_p(probs: torch.Tensor, min_p: torch.Tensor) -> torch.Tensor:
    """probs [S, V] with the tokens below min_p [S] x the row's largest probability set to 0 (min_p 0 keeps all)."""
    threshold = min_p[:, None] * probs.amax(dim=-1, keepdim=True)  # [S, 1]
    return probs.masked_fill(probs < threshold, 0.0)
