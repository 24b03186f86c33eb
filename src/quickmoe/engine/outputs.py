"""What the engine reports: each request's new tokens and text per step (StepOutput, with their log-probabilities),
and its state for metrics (EngineStats)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from quickmoe.executor.step_timer import StepTotals

__all__ = ["EngineStats", "StepOutput", "TokenLogprob"]


@dataclass(frozen=True)
class TokenLogprob:
    """A generated token's log-probability under the model (raw logits), and the `top` most likely ones."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class StepOutput:
    """What one request gained in one step: new token ids and the text that is now safe to show.
    `finished` is set on its last output; finish_reason is "stop", "length" or "abort"."""

    request_id: str
    token_ids: list[int]
    text: str
    logprobs: list[TokenLogprob] | None
    finished: bool
    finish_reason: str | None
    stop_reason: int | str | None
    num_prompt_tokens: int
    num_output_tokens: int
    index: int = 0  # which of the request's n samples moved
    scheduled_time: float | None = None  # on a sample's first output: time.monotonic() when it was first scheduled
    # on a sample's first output when the request asked for prompt_logprobs: one per prompt token (None first)
    prompt_logprobs: list[TokenLogprob | None] | None = None


@dataclass(frozen=True)
class EngineStats:
    num_running: int
    num_waiting: int
    kv_cache_usage: dict[str, float]  # fraction of each cache group's blocks in use
    num_preemptions: int
    num_prefix_queries: int = 0  # prompt tokens looked up in the prefix cache
    num_prefix_hits: int = 0  # of which were found there
    num_scheduled_tokens: int = 0  # tokens computed by all steps
    steps: StepTotals | None = None  # device time per step kind, idle and host time (None: steps not timed)
