"""Per-request sampling parameters, validated at construction."""

from __future__ import annotations

from dataclasses import dataclass, field

from quickmoe.errors import RequestError


@dataclass(frozen=True)
class SamplingParams:
    """How to pick the next tokens of one request.

    temperature 0 means greedy. top_p keeps the smallest set of most likely tokens whose probability
    reaches top_p. `seed` makes a request's sampling reproducible whatever else is in the batch.
    Generation stops at an EOS token (unless ignore_eos), at a token of `stop_token_ids`, or after
    `max_tokens` tokens.
    """

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = field(default_factory=tuple)
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise RequestError(f"sampling parameter 'max_tokens' = {self.max_tokens!r}: expected an integer >= 1")
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)) \
                or not 0 <= self.temperature < float("inf"):
            raise RequestError(f"sampling parameter 'temperature' = {self.temperature!r}: expected a number >= 0")
        if isinstance(self.top_p, bool) or not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1:
            raise RequestError(f"sampling parameter 'top_p' = {self.top_p!r}: expected a number in (0, 1]")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise RequestError(f"sampling parameter 'seed' = {self.seed!r}: expected an integer or None")
        ids = tuple(self.stop_token_ids)
        if any(isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in ids):
            raise RequestError(f"sampling parameter 'stop_token_ids' = {self.stop_token_ids!r}: "
                               "expected non-negative integers")
        object.__setattr__(self, "stop_token_ids", ids)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0
