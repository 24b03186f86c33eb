"""Function tools in OpenAI's request shapes (chat completions and the Responses API): the tool definitions, the
tool calls an assistant message carries back, and `tool_choice` ("none", "auto", "required", or one function)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from quickmoe.server.request_fields import StrictModel

__all__ = ["FunctionDefinition", "NamedToolChoice", "ResponsesFunctionTool", "ToolCall", "ToolDefinition",
           "check_tool_choice"]

NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"  # OpenAI's rule for function names


class FunctionDefinition(StrictModel):
    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None  # the arguments follow `parameters` when the model does (no grammar is applied)


class ToolDefinition(StrictModel):
    """A chat completions tool: {"type": "function", "function": {...}}."""

    type: Literal["function"]
    function: FunctionDefinition


class ResponsesFunctionTool(StrictModel):
    """A Responses API tool: {"type": "function", "name", "description", "parameters", "strict"}."""

    type: Literal["function"]
    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class _CalledFunction(StrictModel):
    name: str
    arguments: str


class ToolCall(StrictModel):
    """A tool call an assistant message made (sent back in the conversation)."""

    id: str
    type: Literal["function"] = "function"
    function: _CalledFunction


class _ChoiceFunction(StrictModel):
    name: str


class NamedToolChoice(StrictModel):
    """{"type": "function", "function": {"name"}} (chat) or {"type": "function", "name"} (Responses API)."""

    type: Literal["function"]
    function: _ChoiceFunction | None = None
    name: str | None = None

    @property
    def function_name(self) -> str | None:
        return self.function.name if self.function is not None else self.name


def check_tool_choice(choice: str | NamedToolChoice | None, names: list[str]) -> str | None:
    """What is wrong with `tool_choice` given the tools' names, or None."""
    if isinstance(choice, NamedToolChoice):
        if choice.function_name is None:
            return "expected {'type': 'function', 'function': {'name': ...}}"
        if choice.function_name not in names:
            return f"names the function {choice.function_name!r}, which is not among the tools ({names})"
    elif choice == "required" and not names:
        return "'required' needs tools"
    return None
