"""Comparing greedy continuations of one prompt that ran in different batches. Batching changes the order of float
sums, so on a near tie (two tokens within float32 noise) greedy may pick either: the continuations must be the same
until they part, if they part at all, at a near tie seen by both. Log-probabilities come with the responses
(completions' `logprobs=N`, chat's `logprobs` + `top_logprobs`)."""

from __future__ import annotations

TIE = 1e-3  # log-probability gap below which two greedy picks may differ (float32 CPU sums differ by ~1e-6)
TOP = 5  # top log-probabilities to ask for


def completion_tokens(logprobs) -> list[tuple[str, float, dict[str, float]]]:
    """(token, its logprob, the top logprobs) per generated token of a completions choice's `logprobs`."""
    return list(zip(logprobs.tokens, logprobs.token_logprobs, logprobs.top_logprobs))


def chat_tokens(logprobs) -> list[tuple[str, float, dict[str, float]]]:
    """The same from a chat choice's `logprobs` (`content`: one entry per generated token)."""
    return [(e.token, e.logprob, {t.token: t.logprob for t in e.top_logprobs}) for e in logprobs.content]


def assert_same_greedy(a, b) -> None:
    """a and b: lists of (token, logprob, top logprobs). The same tokens, or the same up to a first difference
    where each side's pick is in the other's top log-probabilities within TIE of the other's own pick."""
    assert a and b, "no tokens to compare"
    for (tok_a, lp_a, top_a), (tok_b, lp_b, top_b) in zip(a, b):
        if tok_a != tok_b:
            assert tok_b in top_a and abs(top_a[tok_b] - lp_a) < TIE, ("not a near tie", tok_a, tok_b, top_a)
            assert tok_a in top_b and abs(top_b[tok_a] - lp_b) < TIE, ("not a near tie", tok_a, tok_b, top_b)
            return
