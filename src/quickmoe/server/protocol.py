"""The OpenAI request bodies the server accepts, as pydantic models with OpenAI's field names.

Every field is honoured or refused: the schemas are explicit (`extra="forbid"`), so a field quickmoe does not know
is a 400 naming it, and the fields of OpenAI's schemas that quickmoe does not implement
(`request_fields.UNSUPPORTED`) are a 400 naming them unless they hold their neutral value (e.g. `store: false`).
Fields are strict (no "5" for 5, no true for 1; an integer is fine where a number is expected).
Extensions (vLLM's names): top_k, min_p, repetition_penalty, min_tokens, prompt_logprobs, ignore_eos,
stop_token_ids, include_stop_str_in_output, skip_special_tokens.

A completion prompt is a string, a list of token ids, or a list of several of those (one choice each, n per
prompt). Identifiers (`user`, `safety_identifier`) and `prompt_cache_key` (prefix caching is automatic) are taken
and only logged with --enable-log-requests.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from quickmoe.engine.sampling_params import MAX_LOGPROBS, MAX_N
from quickmoe.engine_config import SEED_RANGE
from quickmoe.server.request_fields import FieldProblem, StrictModel
from quickmoe.server.structured_protocol import ResponseFormat, StructuredOutputs
from quickmoe.server.tool_protocol import NamedToolChoice, ToolCall, ToolDefinition, check_tool_choice

__all__ = ["ChatCompletionRequest", "ChatMessage", "CompletionRequest", "StreamOptions"]

MAX_STOP_STRINGS = 16
MAX_STOP_LENGTH = 1024
MAX_PROMPTS = 256  # prompts in one /v1/completions request
class StreamOptions(StrictModel):
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


class _SamplingFields(StrictModel):
    """The sampling fields both endpoints share."""

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=0)
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=-1)
    n: int = Field(default=1, ge=1, le=MAX_N)
    stop: Any = None
    seed: int | None = Field(default=None, ge=SEED_RANGE[0], le=SEED_RANGE[1])
    stream: bool = False
    stream_options: StreamOptions | None = None
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    logit_bias: dict[str, float] | None = None
    user: str | None = None
    # extensions (vLLM's names)
    min_p: float | None = Field(default=None, ge=0, le=1)
    repetition_penalty: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    min_tokens: int = Field(default=0, ge=0)
    prompt_logprobs: int | None = Field(default=None, ge=0, le=MAX_LOGPROBS)
    response_format: ResponseFormat | None = None
    structured_outputs: StructuredOutputs | None = None
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

    @field_validator("logit_bias")
    @classmethod
    def _logit_bias(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        for key, bias in (value or {}).items():
            if not key.isdigit():
                raise ValueError(f"expected token ids (integers as strings) as keys, got {key!r:.40}")
            if not -100 <= bias <= 100:
                raise ValueError(f"expected biases in [-100, 100], got {bias!r} for token {key}")
        return value

    def check(self) -> FieldProblem | None:
        """The first field set to something quickmoe does not do (or contradicting another), or None."""
        fmt, so = self.response_format, self.structured_outputs
        if fmt is not None and fmt.type == "json_schema" and fmt.json_schema is None:
            return FieldProblem("response_format", "response_format json_schema needs 'json_schema': {'schema': ...}")
        if so is not None:
            given = [k for k in ("json_", "regex", "choice", "grammar") if getattr(so, k) is not None]
            given += ["json_object"] if so.json_object else []
            if len(given) != 1:
                return FieldProblem("structured_outputs", "expected exactly one of json, regex, choice, grammar, "
                                    "json_object")
            if fmt is not None and fmt.type != "text":
                return FieldProblem("structured_outputs", "response_format and structured_outputs both constrain "
                                    "the output: send one")
        return None

    @property
    def structured_field(self) -> str:
        return "structured_outputs" if self.structured_outputs is not None else "response_format"

    def structured(self) -> tuple[str, str] | None:
        """(kind, specification) of the output constraint asked for, or None."""
        fmt, so = self.response_format, self.structured_outputs
        if fmt is not None and fmt.type == "json_object":
            return "json_object", ""
        if fmt is not None and fmt.type == "json_schema":
            return "json_schema", json.dumps(fmt.json_schema.schema_)
        if so is None:
            return None
        if so.json_ is not None:
            return "json_schema", so.json_ if isinstance(so.json_, str) else json.dumps(so.json_)
        if so.regex is not None:
            return "regex", so.regex
        if so.choice is not None:
            return "choice", json.dumps(so.choice)
        if so.grammar is not None:
            return "grammar", so.grammar
        return "json_object", ""

    @property
    def stop_strings(self) -> tuple[str, ...]:
        return () if self.stop is None else (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class CompletionRequest(_SamplingFields):
    """POST /v1/completions."""

    endpoint: ClassVar[str] = "completions"
    prompt: Any
    echo: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=MAX_LOGPROBS)
    best_of: int | None = Field(default=None, ge=1)

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt(cls, value: Any) -> list[str | list[int]]:
        """The prompts: a string or token ids, or a non-empty list of several of those."""
        def one(p: Any) -> str | list[int] | None:
            if isinstance(p, str):
                return p
            if isinstance(p, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
                return p
            return None

        single = one(value)
        if single is not None and not (isinstance(value, list) and not value):
            return [single]
        if isinstance(value, list) and value and all(isinstance(p, (str, list)) for p in value):
            if len(value) > MAX_PROMPTS:
                raise ValueError(f"expected at most {MAX_PROMPTS} prompts, got {len(value)}")
            prompts = [one(p) for p in value]
            if all(p is not None for p in prompts):
                return prompts
        raise ValueError("expected a string, a list of token ids (integers), or a list of several of those")

    def check(self) -> FieldProblem | None:
        if self.best_of is not None and self.best_of != self.n:
            return FieldProblem("best_of", f"best_of = {self.best_of}: only best_of = n ({self.n}) is supported "
                                "(every sample is returned)")
        if self.max_tokens == 0 and not self.echo:
            return FieldProblem("max_tokens", "max_tokens = 0 needs echo: true (it returns the prompt only)")
        if self.prompt_logprobs is not None and self.stream:
            return FieldProblem("prompt_logprobs", "prompt_logprobs is not supported with stream: true")
        return super().check()


class TextPart(StrictModel):
    type: Literal["text"]
    text: str


class ChatMessage(StrictModel):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: list[TextPart] | None = None  # a string is taken as one text part
    name: str | None = None
    tool_calls: list[ToolCall] | None = None  # assistant
    tool_call_id: str | None = None  # tool: the call this is the result of
    reasoning: str | None = None  # assistant: its reasoning (harmony's analysis channel)
    reasoning_content: str | None = None  # the same, under its older name

    def as_dict(self) -> dict[str, Any]:
        """The message as tokenizer.chat renders it."""
        return {"role": self.role, "content": self.text(), "name": self.name,
                "tool_calls": [c.model_dump() for c in self.tool_calls or ()], "tool_call_id": self.tool_call_id,
                "reasoning": self.reasoning or self.reasoning_content}

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

    endpoint: ClassVar[str] = "chat/completions"
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    reasoning_effort: Literal["low", "medium", "high"] | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_LOGPROBS)
    tools: list[ToolDefinition] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None  # gpt-oss calls one function per turn (<|call|> ends it) either way
    prompt_cache_key: str | None = None
    safety_identifier: str | None = None

    @property
    def tool_names(self) -> list[str]:
        return [t.function.name for t in self.tools or ()]

    @property
    def rendered_tools(self) -> list[dict[str, Any]] | None:
        """The tools the model is told about ({"name", "description", "parameters"}): none with tool_choice
        "none"."""
        if not self.tools or self.tool_choice == "none":
            return None
        return [t.function.model_dump() for t in self.tools]

    @property
    def forced_tool(self) -> str | None:
        """The function the reply must call ('' when any tool must be called: tool_choice "required" with
        several tools), else None."""
        if isinstance(self.tool_choice, NamedToolChoice):
            return self.tool_choice.function_name
        if self.tool_choice == "required":
            return self.tool_names[0] if len(self.tool_names) == 1 else ""
        return None

    @property
    def completion_tokens_limit(self) -> int | None:
        """max_completion_tokens, else the older max_tokens."""
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    def check(self) -> FieldProblem | None:
        if self.top_logprobs and not self.logprobs:
            return FieldProblem("top_logprobs", "top_logprobs needs logprobs: true")
        if self.max_tokens == 0 or self.max_completion_tokens == 0:
            return FieldProblem("max_completion_tokens" if self.max_completion_tokens == 0 else "max_tokens",
                                "expected at least 1 token")
        if self.prompt_logprobs is not None and self.stream:
            return FieldProblem("prompt_logprobs", "prompt_logprobs is not supported with stream: true")
        problem = check_tool_choice(self.tool_choice, self.tool_names)
        if problem is not None:
            return FieldProblem("tool_choice", f"tool_choice {problem}")
        return super().check()
