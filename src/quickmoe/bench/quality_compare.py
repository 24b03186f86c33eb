"""Greedy agreement between two runs of the same prompts: the share of tokens identical until each prompt's first
divergence, and how far apart the log-probabilities are where both runs still saw the same context."""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class GreedyRun:
    """One execution path's greedy output: per prompt, the tokens and, per token, the top log-probabilities
    ({token id: log-probability}, the chosen token included)."""

    tokens: tuple[tuple[int, ...], ...]
    top: tuple[tuple[dict[int, float], ...], ...]
    seconds: float = 0.0


@dataclass(frozen=True)
class Agreement:
    prompts: int
    identical_prompts: int  # whole outputs equal
    tokens: int  # generated tokens compared (per prompt: the shorter output)
    agreeing_tokens: int  # tokens before each prompt's first divergence
    max_abs: float  # max |logprob A - logprob B| over the top tokens both report, before the divergence
    max_rel: float  # max_abs over the largest |logprob| compared
    median_margin_at_divergence: float | None  # A's top-1 minus top-2 log-probability where B chose otherwise

    @property
    def token_agreement(self) -> float:
        return self.agreeing_tokens / self.tokens if self.tokens else 1.0


def compare(a: GreedyRun, b: GreedyRun) -> Agreement:
    """How B agrees with A (the reference path of the pair)."""
    if len(a.tokens) != len(b.tokens):
        raise ValueError(f"runs of {len(a.tokens)} and {len(b.tokens)} prompts")
    identical = tokens = agreeing = 0
    max_abs, max_mag, margins = 0.0, 0.0, []
    for ta, tb, pa, pb in zip(a.tokens, b.tokens, a.top, b.top):
        n = min(len(ta), len(tb))
        tokens += n
        identical += ta == tb
        first = next((i for i in range(n) if ta[i] != tb[i]), n)
        agreeing += first
        for i in range(min(first + 1, n, len(pa), len(pb))):  # the divergence step itself saw the same context
            for tok in pa[i].keys() & pb[i].keys():
                max_abs = max(max_abs, abs(pa[i][tok] - pb[i][tok]))
                max_mag = max(max_mag, abs(pa[i][tok]))
        if first < n and first < len(pa):
            ranked = sorted(pa[first].values(), reverse=True)
            if len(ranked) >= 2:
                margins.append(ranked[0] - ranked[1])
    return Agreement(len(a.tokens), identical, tokens, agreeing, max_abs, max_abs / max_mag if max_mag else 0.0,
                     statistics.median(margins) if margins else None)
