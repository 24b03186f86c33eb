"""What every request body model shares: strict pydantic models (`StrictModel`: unknown fields are a 400 naming them,
no coercion), the OpenAI fields quickmoe does not implement (`UNSUPPORTED`: refused unless they hold their neutral
value), and `FieldProblem`, the 400 that names the field a request got wrong."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["UNSUPPORTED", "FieldProblem", "StrictModel", "unsupported_field"]

_NEUTRAL = (None, False, "", [], {}, "auto", "default", ["text"])
# OpenAI fields quickmoe does not implement, per endpoint, and the values that mean "not used" (allowed)
UNSUPPORTED: dict[str, dict[str, tuple]] = {
    "completions": {"suffix": (None, "")},
    "chat/completions": {name: _NEUTRAL for name in (
        "audio", "function_call", "functions", "metadata", "modalities", "moderation", "prediction",
        "prompt_cache_options", "prompt_cache_retention", "service_tier", "store", "verbosity",
        "web_search_options")},
    "responses": {**{name: _NEUTRAL for name in (
        "access_programs", "background", "context_management", "conversation", "image", "include",
        "max_tool_calls", "moderation", "prompt", "prompt_cache_options", "prompt_cache_retention",
        "service_tier")}, "truncation": (None, "disabled"), "top_logprobs": (None, 0)},
}


class StrictModel(BaseModel):
    """A request body (or part of one): unknown fields are refused, values are not coerced ("5" is not 5, true is
    not 1; an integer is fine where a number is expected), instances are frozen."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class FieldProblem(ValueError):  # noqa: N818 (a problem, not an exception users catch)
    """A field set to something quickmoe does not do (an OpenAI feature not implemented, with a value that would
    change the result), or fields that contradict each other."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def unsupported_field(endpoint: str, data: dict[str, Any]) -> FieldProblem | None:
    """The first OpenAI field of `data` that quickmoe does not implement and that holds a value that would matter;
    such fields holding their neutral value are removed from `data`."""
    for name, neutral in UNSUPPORTED.get(endpoint, {}).items():
        if name not in data:
            continue
        value = data[name]
        if any(value == v and type(value) is type(v) for v in neutral):
            del data[name]
            continue
        return FieldProblem(name, f"{name} is not supported by this server (got {str(value)[:60]!r}; leave it out)")
    return None
