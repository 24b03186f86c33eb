"""The OpenAI request bodies the server accepts, as pydantic models with OpenAI's field names.

Fields are strict (no "5" for 5, no true for 1; an integer is fine where a number is expected). Unknown fields
are ignored, as OpenAI's API does; fields of OpenAI's that quickmoe cannot honour (n > 1, echo, tools, logit
bias, penalties, suffix...) are rejected with 400 naming the field rather than silently dropped.
Extensions (vLLM's names): top_k, ignore_eos, stop_token_ids, include_stop_str_in_output, skip_special_tokens.

A completion prompt is a string, a list of token ids, or a list holding one of those (a batch of several
prompts is 400: send one request per prompt).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from quickmoe.engine_config import SEED_RANGE
from quickmoe.engine.sampling_params import MAX_LOGPROBS

__all__ = ["ChatCompletionRequest", "ChatMessage", "CompletionRequest", "StreamOptions", "FieldProblem"]

MAX_STOP_STRINGS = 16
MAX_STOP_LENGTH = 1024


class FieldProblem(ValueError):
    """A field set to something quickmoe does not do (an OpenAI feature not implemented, with a value that would
    change the result), or fields that contradict each other."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class StreamOptions(_Strict):
    include_usage: bool = False
    continuous_usage_stats: bool = False


def _check_stop(value: Any) -> str | list[str] | None:
    if value is None or isinstance(value, str):
        stops = [] if value is None else [value]
    elif isinstance(value, list) and all(isinstance(s, str) for s in value):
        stops = value
    else:
        raise ValueError("expected a string or a list of strings")
    if len(stops) > MAX_STOP_STRINGS:
        raise ValueError(f"expected at most {MAX_STOP_STRINGS} stop strings, got {len(stops)}")
    for s in stops:
        if not s or len(s) > MAX_STOP_LENGTH:
            raise ValueError(f"expected stop strings of 1 to {MAX_STOP_LENGTH} characters, got {s!r:.60}")
    return value


class _SamplingFields(_Strict):
    """The sampling fields both endpoints share."""

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=-1)
    n: int = 1
    stop: Any = None
    seed: int | None = Field(default=None, ge=SEED_RANGE[0], le=SEED_RANGE[1])
    stream: bool = False
    stream_options: StreamOptions | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, Any] | None = None
    user: str | None = None
    # extensions
    ignore_eos: bool = False
    stop_token_ids: list[int] | None = Field(default=None, max_length=64)
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True

    @field_validator("stop", mode="before")
    @classmethod
    def _stop(cls, value: Any) -> Any:
        return _check_stop(value)

    @field_validator("stop_token_ids")
    @classmethod
    def _stop_token_ids(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and any(not 0 <= t < 2**31 for t in value):
            raise ValueError("expected token ids >= 0")
        return value

    def check(self) -> FieldProblem | None:
        """The first field set to something quickmoe does not do (or contradicting another), or None."""
        if self.n != 1:
            return FieldProblem("n", f"n = {self.n}: only n = 1 is supported (send n requests instead)")
        for name in ("presence_penalty", "frequency_penalty"):
            if getattr(self, name) not in (None, 0, 0.0):
                return FieldProblem(name, f"{name} is not supported (expected 0 or null)")
        if self.logit_bias:
            return FieldProblem("logit_bias", "logit_bias is not supported (expected null or {})")
        return None

    @property
    def stop_strings(self) -> tuple[str, ...]:
        return () if self.stop is None else (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class CompletionRequest(_SamplingFields):
    """POST /v1/completions."""

    prompt: Any
    echo: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=MAX_LOGPROBS)
    best_of: int | None = None
    suffix: str | None = None

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt(cls, value: Any) -> str | list[int]:
        """One prompt: a string or token ids (a list holding exactly one of those is unwrapped)."""
        if isinstance(value, list) and value and all(isinstance(p, (str, list)) for p in value):
            if len(value) != 1:
                raise ValueError(f"a batch of {len(value)} prompts is not supported: send one request per prompt")
            value = value[0]
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in value):
            return value
        raise ValueError("expected a string or a list of token ids (integers)")

    def check(self) -> FieldProblem | None:
        if self.echo:
            return FieldProblem("echo", "echo is not supported (expected false)")
        if self.best_of not in (None, 1):
            return FieldProblem("best_of", f"best_of = {self.best_of}: only 1 is supported")
        if self.suffix:
            return FieldProblem("suffix", "suffix is not supported (expected null)")
        return super().check()


class TextPart(_Strict):
    type: Literal["text"]
    text: str


class ChatMessage(_Strict):
    role: Literal["system", "developer", "user", "assistant"]
    content: list[TextPart] | None = None  # a string is taken as one text part
    name: str | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _content(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [{"type": "text", "text": value}]
        if value is not None and not isinstance(value, list):
            raise ValueError("expected a string or a list of {'type': 'text', 'text': ...} parts")
        return value

    def text(self) -> str:
        return "".join(p.text for p in self.content) if self.content else ""


class ChatCompletionRequest(_SamplingFields):
    """POST /v1/chat/completions."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    reasoning_effort: Literal["low", "medium", "high"] | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_LOGPROBS)
    tools: list[Any] | None = None
    tool_choice: Any = None
    response_format: dict[str, Any] | None = None

    @property
    def completion_tokens_limit(self) -> int | None:
        """max_completion_tokens, else the older max_tokens."""
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    def check(self) -> FieldProblem | None:
        if self.top_logprobs and not self.logprobs:
            return FieldProblem("top_logprobs", "top_logprobs needs logprobs: true")
        if self.tools:
            return FieldProblem("tools", "tools are not supported yet (expected null or [])")
        if self.tool_choice not in (None, "none", "auto"):
            return FieldProblem("tool_choice", "tool_choice is not supported (expected null, 'none' or 'auto')")
        if self.response_format is not None and self.response_format.get("type", "text") != "text":
            return FieldProblem("response_format", "only response_format {'type': 'text'} is supported")
        return super().check()
