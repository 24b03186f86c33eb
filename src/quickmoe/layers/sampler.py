"""Turns last-token logits into next tokens: greedy, or temperature + top-p with per-request generators."""

from __future__ import annotations

import torch

from quickmoe.runtime.sampling_params import SamplingParams


def top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero all but the smallest set of most likely tokens whose total probability reaches top_p.

    probs [V] -> [V], renormalised. A token is kept when the mass strictly before it is < top_p,
    so the most likely token is always kept.
    """
    if top_p >= 1.0:
        return probs
    sorted_probs, order = probs.sort(descending=True)
    mass_before = sorted_probs.cumsum(0) - sorted_probs
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p, 0.0)
    kept = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    return kept / kept.sum()


class Sampler:
    """Samples one token per sequence. Sampling runs on the CPU in float32 with each request's own
    `torch.Generator`, so a seeded request draws the same tokens whatever the batch around it."""

    def __call__(self, logits: torch.Tensor, params: list[SamplingParams],
                 generators: list[torch.Generator | None]) -> list[int]:
        """logits [B, V] (any device) -> B token ids."""
        greedy_ids = logits.argmax(dim=-1).tolist()
        if all(p.greedy for p in params):
            return greedy_ids
        logits_cpu = logits.float().cpu()
        out = []
        for row, p, gen, greedy_id in zip(logits_cpu, params, generators, greedy_ids):
            if p.greedy:
                out.append(greedy_id)
                continue
            probs = top_p_filter(torch.softmax(row / p.temperature, dim=-1), p.top_p)
            out.append(int(torch.multinomial(probs, 1, generator=gen)))
        return out
