"""What the engine reports: each request's new tokens and text per step (StepOutput, with their log-probabilities),
and its state for metrics (EngineStats)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from quickmoe.executor.step_totals import StepTotals

__all__ = ["EngineStats", "StepOutput", "TokenLogprob", "merge_outputs"]


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


def merge_outputs(first: StepOutput, then: StepOutput) -> StepOutput:
    """One output saying what two consecutive outputs of the same request sample say (a reader that fell behind
    takes them at once): the tokens, text and log-probabilities of both in order, the later one's end and counts,
    the earlier one's first-output fields."""
    assert (first.request_id, first.index) == (then.request_id, then.index) and not first.finished, \
        "merge consecutive outputs of one sample, the finished one last"
    logprobs = None if first.logprobs is None and then.logprobs is None else \
        [*(first.logprobs or ()), *(then.logprobs or ())]
    return StepOutput(first.request_id, first.token_ids + then.token_ids, first.text + then.text, logprobs,
                      then.finished, then.finish_reason, then.stop_reason, then.num_prompt_tokens,
                      then.num_output_tokens, then.index,
                      first.scheduled_time if first.scheduled_time is not None else then.scheduled_time,
                      first.prompt_logprobs if first.prompt_logprobs is not None else then.prompt_logprobs)


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
