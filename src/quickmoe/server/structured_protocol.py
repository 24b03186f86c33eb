"""The request fields that constrain the output: OpenAI's `response_format` and vLLM's `structured_outputs`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from quickmoe.server.request_fields import StrictModel

__all__ = ["JSONSchemaFormat", "ResponseFormat", "StructuredOutputs"]


class JSONSchemaFormat(StrictModel):
    name: str | None = None
    description: str | None = None
    schema_: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None  # the schema is always enforced (a token mask)


class ResponseFormat(StrictModel):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JSONSchemaFormat | None = None


class StructuredOutputs(StrictModel):
    """vLLM's `structured_outputs`: exactly one of these."""

    json_: dict[str, Any] | str | None = Field(default=None, alias="json")
    regex: str | None = None
    choice: list[str] | None = Field(default=None, min_length=1)
    grammar: str | None = None
    json_object: bool | None = None
