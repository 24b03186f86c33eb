"""POST /v1/responses request body (OpenAI's Responses API), and its input items turned into the chat messages
tokenizer.chat renders in harmony.

Input: a string (one user message) or items: messages ({"role", "content": str or [{"type": "input_text" |
"output_text", "text"}]}), "function_call" ({"call_id", "name", "arguments"}), "function_call_output"
({"call_id", "output"}) and "reasoning" ({"content": [{"type": "reasoning_text", "text"}]}). Fields OpenAI has
that quickmoe does not implement are a 400 naming them unless they hold their neutral value.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from quickmoe.errors import RequestError
from quickmoe.server.request_fields import FieldProblem, StrictModel
from quickmoe.server.tool_protocol import NamedToolChoice, ResponsesFunctionTool, check_tool_choice

__all__ = ["ResponsesRequest", "input_messages"]



class ReasoningConfig(StrictModel):
    effort: Literal["low", "medium", "high"] | None = None
    summary: None = None  # quickmoe returns the reasoning text itself, never a summary of it


class TextFormat(StrictModel):
    type: Literal["text"]


class TextConfig(StrictModel):
    format: TextFormat | None = None
    verbosity: Literal["medium"] | None = None


class ResponsesRequest(StrictModel):
    endpoint: ClassVar[str] = "responses"
    model: str | None = None
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[ResponsesFunctionTool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    reasoning: ReasoningConfig | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    stream: bool = False
    store: bool = True
    previous_response_id: str | None = None
    metadata: dict[str, str] | None = None
    text: TextConfig | None = None
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None

    @field_validator("input", mode="before")
    @classmethod
    def _input(cls, value: Any) -> Any:
        if isinstance(value, list) and not all(isinstance(item, dict) for item in value):
            raise ValueError("expected a string or a list of input items (objects)")
        return value

    def check(self) -> FieldProblem | None:
        names = [t.name for t in self.tools or ()]
        problem = check_tool_choice(self.tool_choice, names)
        if problem is not None:
            return FieldProblem("tool_choice", f"tool_choice {problem}")
        return None

    @property
    def reasoning_effort(self) -> str | None:
        return self.reasoning.effort if self.reasoning is not None else None

    @property
    def rendered_tools(self) -> list[dict[str, Any]] | None:
        if not self.tools or self.tool_choice == "none":
            return None
        return [t.model_dump(exclude={"type", "strict"}) for t in self.tools]

    @property
    def forced_tool(self) -> str | None:
        names = [t.name for t in self.tools or ()]
        if isinstance(self.tool_choice, NamedToolChoice):
            return self.tool_choice.function_name
        if self.tool_choice == "required":
            return names[0] if len(names) == 1 else ""
        return None


def _text(content: Any, where: str, kinds: tuple[str, ...]) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") not in kinds or not isinstance(part.get("text"), str):
                raise RequestError(f"{where}.content[{j}]: expected {{'type': one of {list(kinds)}, 'text': str}}")
            parts.append(part["text"])
        return "".join(parts)
    raise RequestError(f"{where}.content: expected a string or a list of text parts")


def input_messages(value: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The input as chat messages (RequestError naming the item that is not understood)."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    messages: list[dict[str, Any]] = []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer", "assistant"):
                raise RequestError(f"{where}.role = {role!r}: expected user, system, developer or assistant")
            messages.append({"role": role, "content": _text(item.get("content"), where,
                                                            ("input_text", "output_text", "text"))})
        elif kind == "function_call":
            if not all(isinstance(item.get(k), str) for k in ("call_id", "name", "arguments")):
                raise RequestError(f"{where}: expected a function_call with 'call_id', 'name' and 'arguments'")
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": item["call_id"], "function": {"name": item["name"], "arguments": item["arguments"]}}]})
        elif kind == "function_call_output":
            if not isinstance(item.get("call_id"), str) or not isinstance(item.get("output"), str):
                raise RequestError(f"{where}: expected a function_call_output with 'call_id' and 'output' (a string)")
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
        elif kind == "reasoning":
            messages.append({"role": "assistant", "content": "",
                             "reasoning": _text(item.get("content") or [], where, ("reasoning_text",))})
        else:
            raise RequestError(f"{where}.type = {kind!r}: expected message, function_call, function_call_output or "
                               "reasoning")
    return messages
